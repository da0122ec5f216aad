"""The ansible-playbook commands README's "Using it" table and
docs/quickstart.md show, read from the documents themselves, so that the
integration tests run them as a user types them (tests/integration:
run_doc_command) and a unit test checks that every one of them is run
(tests/unit/test_doc_commands.py).

A command is its text as the document shows it: `<cluster>` is an
inventory's name; `[-e name=value]` is an option the user may add; an
upper-case value (N, ID, DIR) is the user's to choose, any other value is
typed as shown. The quickstart also says what each command prints last: a
line `It ends with `...`` under its block (more than one quoted line: one
of them), where `<...>` and `...` stand for any text.
"""

import os
import re

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SOURCES = ("README.md", os.path.join("docs", "quickstart.md"))

_COMMAND = re.compile(r"(?:\.venv/bin/)?(ansible-playbook playbooks/\S+\.yml -i inventories/[^\s`]+(?: [^`#\n]*)?)")
_OPTION = re.compile(r"(\[)?-e (\w+)=([^\s\]]+)\]?")
_ENDS_WITH = re.compile(r"^It ends with (`.+)$")


class DocCommand:
    """One command of the documents: its text, the playbook, the inventory,
    the -e options it requires and those it offers, --check, where it is
    shown and, if the document says, the pattern of its last line."""

    def __init__(self, text, source):
        self.text, self.texts, self.sources, self.ends_with = text, [text], [source], None
        words = text.split()
        self.playbook = os.path.basename(words[1])
        self.inventory = words[3].split("/", 1)[1]
        self.check = "--check" in words
        self.required, self.optional = {}, {}
        for bracket, name, value in _OPTION.findall(text):
            (self.optional if bracket else self.required)[name] = value
        rest = _OPTION.sub("", " ".join(words[4:])).replace("--check", "").strip()
        if rest:
            raise ValueError("%s: %r has words the tests cannot read: %r" % (source, text, rest))

    def key(self):
        """What makes two commands the same whatever the order of their
        options and whichever inventory they show (the local inventory is
        one `<cluster>`)."""
        return (self.playbook, self.check, sorted(self.required.items()),
                sorted(self.optional.items()))

    def inventories(self, shipped):
        """The inventories the command may run with: any of ``shipped`` for
        `<cluster>`, else the one it names."""
        return list(shipped) if self.inventory == "<cluster>" else [self.inventory]

    def extra_vars(self, chosen):
        """The -e values of a run that gives ``chosen`` (name: value; the
        options it takes up and the values of the required ones): refused
        when it leaves out a required option, adds one the document does
        not offer, or gives another value than the one typed."""
        offered = dict(self.optional, **self.required)
        missing = sorted(set(self.required) - set(chosen))
        unknown = sorted(set(chosen) - set(offered))
        if missing or unknown:
            raise ValueError("%r: %s" % (self.text, "; ".join(
                ["needs %s" % ", ".join(missing)] * bool(missing) + ["offers no %s" % ", ".join(unknown)] * bool(unknown))))
        for name, value in chosen.items():
            shown = offered[name]
            if not shown.isupper() and str(value).lower() != shown.lower():
                raise ValueError("%r types %s=%s, not %r" % (self.text, name, shown, value))
        return dict(chosen)

    def last_line_pattern(self):
        """The regular expression of the line the document says the command
        ends with, or None."""
        if not self.ends_with:
            return None
        return re.compile("|".join("(?:%s)$" % "".join(
            ".*?" if part == "..." or part.startswith("<") else re.escape(part)
            for part in re.split(r"(<[^>]+>|\.\.\.)", shown)) for shown in self.ends_with))


def _block_commands(text):
    """(command text, the lines `It ends with` below its block shows, or None)."""
    found = []
    for match in re.finditer(r"```sh\n(.*?)```\n(\n*)([^\n]*)", text, re.S):
        commands = [_COMMAND.search(line) for line in match.group(1).splitlines()]
        commands = [command.group(1).strip() for command in commands if command]
        ends = _ENDS_WITH.match(match.group(3))
        shown = re.findall(r"`([^`]+)`", ends.group(1)) if ends else None
        for command in commands:
            found.append((command, shown if len(commands) == 1 else None))
    return found


def _table_commands(text):
    section = text.split("## Using it", 1)[1].split("\n## ", 1)[0]
    return [(match.group(1).strip(), None) for line in section.splitlines() if line.startswith("|")
            for match in [_COMMAND.search(line.split("|")[-2])] if match]


def doc_commands():
    """Every command of the documents, once (the same command in both, or
    with its options in another order, is one)."""
    by_key = {}
    for source in SOURCES:
        with open(os.path.join(REPO, source)) as handle:
            text = handle.read()
        for shown, ends_with in _table_commands(text) if source == "README.md" else _block_commands(text):
            command = DocCommand(shown, source)
            known = by_key.setdefault(repr(command.key()), command)
            if known is not command:
                known.sources.append(source)
                known.texts.append(shown)
                # A run on the one it names is a run of both.
                if command.inventory != "<cluster>":
                    known.inventory = command.inventory
            known.ends_with = known.ends_with or ends_with
    return list(by_key.values())


def doc_command(text):
    """The command of the documents one of whose texts is ``text``."""
    for command in doc_commands():
        if text in command.texts:
            return command
    raise KeyError("no document shows %r (README.md's \"Using it\" table, docs/quickstart.md)" % text)
