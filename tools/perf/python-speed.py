"""How fast an interpreter runs this project's kind of work: a dict loop
(the controller's templating and bookkeeping) and compiling every
ansible.module_utils source (what each Ansible module's process does),
best of five each. Run it with each interpreter to compare, side by side:

    for py in /usr/bin/python3 ~/.pyenv/versions/3.12.1/bin/python3; do
        $py tools/perf/python-speed.py .venv; done
"""

import glob
import os
import sys
import time


def loop():
    started = time.perf_counter()
    table = {}
    for number in range(2000000):
        table[number % 1000] = str(number)
    return time.perf_counter() - started


def compile_all(sources):
    started = time.perf_counter()
    for source in sources:
        compile(source, "x", "exec")
    return time.perf_counter() - started


def main():
    venv = sys.argv[1] if len(sys.argv) > 1 else ".venv"
    paths = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "ansible", "module_utils", "**", "*.py"),
                      recursive=True)
    if not paths:
        sys.exit("no ansible.module_utils under %s: give the environment that has ansible-core" % venv)
    sources = []
    for path in paths:
        with open(path) as handle:
            sources.append(handle.read())
    print("%s: loop %.3f s, compile %.3f s (%d files)" % (sys.executable, min(loop() for attempt in range(5)),
                                                          min(compile_all(sources) for attempt in range(5)), len(sources)))


if __name__ == "__main__":
    main()
