"""A FAKE of the AWX REST API (/api/v2/), for running playbooks/awx.yml with
the real awx.awx modules when no AWX is at hand. It is not AWX.

It serves, over plain HTTP on 127.0.0.1, the requests that awx.awx 24.6.1's
module_utils/controller_api.py makes for the modules awx.yml uses and for its
awx.awx.controller_api lookups (GET of a list with exact-match filters, such
as the credentials of an organization with a name):

* every request must carry `Authorization: Bearer <token>` (the modules send
  CONTROLLER_OAUTH_TOKEN so), otherwise 401; every answer carries the
  X-API-Product-Name/-Version headers the modules compare with their version;
* `/api/v2/<type>/`: GET lists with exact-match filters on fields
  (`?name=...&organization=1`, and the `or__<field>` alternatives get_one
  sends for names that look like ids), all in one page (`next` is null);
  POST creates;
* `/api/v2/<type>/<id>/`: GET, PATCH (changes the fields sent), DELETE;
* `/api/v2/<type>/<id>/survey_spec/`: GET (`{}` until one is stored), POST
  stores it, DELETE removes it;
* `/api/v2/<type>/<id>/<sub-list>/` (success_nodes, credentials, labels,
  ...): GET lists the associated objects, POST `{"id": n}` associates and
  `{"id": n, "disassociate": true}` disassociates (204 both), as
  modify_associations does;
* `/api/v2/unified_job_templates/`: the projects, inventory sources, job
  templates and workflows together, with their `type`;
* AWX's one side effect the project module waits for: a project with an SCM
  type launches a project update when made or when its SCM fields change;
  here that update has finished successfully at once.

Objects are stored as they were sent, plus id, type, url, related and
summary_fields, and answered back so: a second run of the modules sees what
the first one stored. The organization "Default" exists from the start, as
in a fresh AWX.

It does NOT validate like AWX does: no required fields, no field types or
choices, no uniqueness of names, no defaults filled in, no checks that a
playbook exists in the project or that a survey is well formed, no RBAC. A
filter it does not implement (`field__lookup`) or a path it does not know is
answered 400/404 and kept in `unhandled`, so that tests can tell the fake
was asked for more than it does. Every request is recorded in `requests`.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

API = "/api/v2/"
PRODUCT = ("AWX", "24.6.1")
# Resource types (endpoint -> the `type` of its objects).
TYPES = {
    "organizations": "organization",
    "execution_environments": "execution_environment",
    "projects": "project",
    "project_updates": "project_update",
    "credential_types": "credential_type",
    "credentials": "credential",
    "inventories": "inventory",
    "inventory_sources": "inventory_source",
    "job_templates": "job_template",
    "workflow_job_templates": "workflow_job_template",
    "workflow_job_template_nodes": "workflow_job_template_node",
    "labels": "label",
    "instance_groups": "instance_group",
    "notification_templates": "notification_template",
}
# Types that have a survey_spec endpoint.
SURVEYED = ("job_templates", "workflow_job_templates")
# Sub-lists of associated objects, by name: the type of what they list.
SUB_LISTS = {
    "success_nodes": "workflow_job_template_nodes",
    "failure_nodes": "workflow_job_template_nodes",
    "always_nodes": "workflow_job_template_nodes",
    "credentials": "credentials",
    "labels": "labels",
    "instance_groups": "instance_groups",
    "notification_templates_started": "notification_templates",
    "notification_templates_success": "notification_templates",
    "notification_templates_error": "notification_templates",
    "notification_templates_approvals": "notification_templates",
}
# What /api/v2/unified_job_templates/ lists.
UNIFIED = ("projects", "inventory_sources", "job_templates", "workflow_job_templates")
# Project fields whose change makes AWX update the project from its SCM.
PROJECT_SCM_FIELDS = ("scm_type", "scm_url", "scm_branch", "scm_refspec")
# Query parameters that page or sort rather than filter.
PAGING = ("page", "page_size", "order_by")


class ApiError(Exception):
    def __init__(self, status, detail):
        super().__init__(detail)
        self.status, self.detail = status, detail


class AwxApiFake:
    """The store, the request log and the HTTP server around them."""

    def __init__(self, token):
        self.token = token
        self.lock = threading.Lock()
        self.objects = {endpoint: {} for endpoint in TYPES}
        self.surveys = {}                 # (endpoint, id) -> survey spec
        self.associations = {}            # (endpoint, id, sub-list) -> [ids]
        self.requests = []                # dicts: method, path, query, body, status
        self.unhandled = []
        self.next_id = 1
        self.create("organizations", {"name": "Default", "description": ""})
        self.server = None
        self.thread = None

    # --- the server -------------------------------------------------------

    def start(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                fake.serve(self, "GET")

            def do_POST(self):
                fake.serve(self, "POST")

            def do_PATCH(self):
                fake.serve(self, "PATCH")

            def do_PUT(self):
                fake.serve(self, "PUT")

            def do_DELETE(self):
                fake.serve(self, "DELETE")

            def log_message(self, *args):
                # The request log is self.requests; stderr stays quiet.
                pass

        # Port 0: a free port chosen by the kernel, so parallel runs do not clash.
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def serve(self, handler, method):
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        record = {"method": method, "path": parts.path, "query": parse_qs(parts.query, keep_blank_values=True),
                  "body": None, "authorization": handler.headers.get("Authorization")}
        try:
            if raw:
                try:
                    record["body"] = json.loads(raw)
                except ValueError:
                    raise ApiError(400, "the body is not JSON")
            if handler.headers.get("Authorization") != "Bearer %s" % self.token:
                raise ApiError(401, "Authentication credentials were not provided.")
            with self.lock:
                status, answer = self.route(method, parts.path, record["query"], record["body"])
        except ApiError as err:
            status, answer = err.status, {"detail": err.detail}
            if err.status != 401:
                self.unhandled.append(dict(record, status=status, detail=err.detail))
        record["status"] = status
        with self.lock:
            self.requests.append(record)
        body = b"" if answer is None else json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("X-API-Product-Name", PRODUCT[0])
        handler.send_header("X-API-Product-Version", PRODUCT[1])
        if answer is not None:
            handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    # --- the API ----------------------------------------------------------

    def route(self, method, path, query, body):
        if not path.startswith(API) or not path.endswith("/"):
            raise ApiError(404, "not an API path of the fake: %s" % path)
        segments = path[len(API):].strip("/").split("/")
        endpoint = segments[0]
        if endpoint == "unified_job_templates" and len(segments) == 1 and method == "GET":
            return 200, self.listing(UNIFIED, query)
        if endpoint not in TYPES:
            raise ApiError(404, "the fake has no %s" % endpoint)
        if len(segments) == 1:
            if method == "GET":
                return 200, self.listing((endpoint,), query)
            if method == "POST":
                return 201, self.create(endpoint, body or {}, launched=True)
            raise ApiError(405, "%s on a list" % method)
        item = self.get(endpoint, segments[1])
        if len(segments) == 2:
            if method == "GET":
                return 200, self.show(endpoint, item)
            if method == "PATCH":
                return 200, self.update(endpoint, item, body or {})
            if method == "DELETE":
                self.delete(endpoint, item)
                return 204, None
            raise ApiError(405, "%s on an object" % method)
        if len(segments) == 3 and segments[2] == "survey_spec" and endpoint in SURVEYED:
            key = (endpoint, item["id"])
            if method == "GET":
                return 200, self.surveys.get(key, {})
            if method == "POST":
                self.surveys[key] = body
                return 200, None
            if method == "DELETE":
                self.surveys.pop(key, None)
                return 200, None
            raise ApiError(405, "%s on a survey" % method)
        if len(segments) == 3 and segments[2] in SUB_LISTS:
            return self.sub_list(method, endpoint, item, segments[2], query, body or {})
        raise ApiError(404, "the fake has no %s" % path)

    def get(self, endpoint, id_text):
        try:
            return self.objects[endpoint][int(id_text)]
        except (ValueError, KeyError):
            raise ApiError(404, "no %s %s" % (TYPES[endpoint], id_text))

    def show(self, endpoint, item, **summary):
        """An object as the API answers it: its fields and the links to it."""
        url = "%s%s/%d/" % (API, endpoint, item["id"])
        related = {name: url + name + "/" for name in SUB_LISTS}
        if endpoint in SURVEYED:
            related["survey_spec"] = url + "survey_spec/"
        if endpoint == "projects":
            related["update"] = url + "update/"
        shown = dict(item, type=TYPES[endpoint], url=url, related=related)
        shown["summary_fields"] = dict(item.get("summary_fields", {}), **summary)
        return shown

    def create(self, endpoint, fields, launched=False):
        if "id" in fields:
            raise ApiError(400, "the fake takes no id in a new object")
        item = dict(fields, id=self.next_id)
        self.next_id += 1
        self.objects[endpoint][item["id"]] = item
        if endpoint == "projects":
            item.setdefault("scm_revision", "")
            if launched and item.get("scm_type"):
                return self.show(endpoint, item, current_update=self.update_project(item))
        return self.show(endpoint, item)

    def update(self, endpoint, item, fields):
        if "id" in fields and fields["id"] != item["id"]:
            raise ApiError(400, "the id of an object does not change")
        scm_changed = any(key in fields and fields[key] != item.get(key) for key in PROJECT_SCM_FIELDS)
        item.update(fields)
        if endpoint == "projects" and item.get("scm_type") and scm_changed:
            return self.show(endpoint, item, current_update=self.update_project(item))
        return self.show(endpoint, item)

    def update_project(self, project):
        """AWX launches a project update; here it has finished successfully."""
        revision = "%040x" % (0xfeed0000 + self.next_id)
        update = self.create("project_updates", {
            "name": project["name"], "project": project["id"], "status": "successful", "failed": False,
            "finished": "2024-01-01T00:00:00Z", "scm_revision": revision})
        project["scm_revision"] = revision
        project["summary_fields"] = {"last_update": {"id": update["id"], "status": "successful"}}
        return {"id": update["id"], "status": "pending"}

    def delete(self, endpoint, item):
        del self.objects[endpoint][item["id"]]
        self.surveys.pop((endpoint, item["id"]), None)
        for key in list(self.associations):
            if key[:2] == (endpoint, item["id"]):
                del self.associations[key]
            elif SUB_LISTS[key[2]] == endpoint and item["id"] in self.associations[key]:
                self.associations[key].remove(item["id"])

    def sub_list(self, method, endpoint, item, name, query, body):
        key = (endpoint, item["id"], name)
        target = SUB_LISTS[name]
        ids = self.associations.setdefault(key, [])
        if method == "GET":
            return 200, self.page([self.show(target, self.objects[target][i]) for i in ids], query)
        if method != "POST":
            raise ApiError(405, "%s on a sub-list" % method)
        if not isinstance(body.get("id"), int):
            raise ApiError(400, "the fake only associates existing objects by id")
        self.get(target, body["id"])
        if body.get("disassociate"):
            if body["id"] in ids:
                ids.remove(body["id"])
        elif body["id"] not in ids:
            ids.append(body["id"])
        return 204, None

    def listing(self, endpoints, query):
        shown = [self.show(endpoint, item) for endpoint in endpoints
                 for item in self.objects[endpoint].values()]
        return self.page(shown, query)

    @staticmethod
    def page(shown, query):
        plain, alternatives = {}, {}
        for key, values in query.items():
            if key in PAGING:
                continue
            field = key[len("or__"):] if key.startswith("or__") else key
            if "__" in field:
                raise ApiError(400, "the fake does not filter on %s" % key)
            (alternatives if key.startswith("or__") else plain)[field] = values[-1]

        def matches(item, field, wanted):
            value = item.get(field)
            if isinstance(value, bool):
                return str(value).lower() == wanted.lower()
            return value is not None and str(value) == wanted

        results = [item for item in shown
                   if all(matches(item, field, wanted) for field, wanted in plain.items())
                   and (not alternatives or any(matches(item, field, wanted)
                                                for field, wanted in alternatives.items()))]
        return {"count": len(results), "next": None, "previous": None, "results": results}

    # --- for the tests ----------------------------------------------------

    def named(self, endpoint, name):
        """The stored object of a type with that name (exactly one)."""
        found = [item for item in self.objects[endpoint].values() if item.get("name") == name]
        assert len(found) == 1, "%d %s named %r: %s" % (len(found), endpoint, name, found)
        return found[0]

    def associated(self, endpoint, item, name):
        return list(self.associations.get((endpoint, item["id"], name), []))

    def writes(self, since=0, until=None):
        """The requests from `since` on (up to `until`, not included) that
        would change something in AWX."""
        return [request for request in self.requests[since:until]
                if request["method"] in ("POST", "PATCH", "PUT", "DELETE")]
