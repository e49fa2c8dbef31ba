#!/usr/bin/env python3
"""openapi_check.py: checks openapi/openapi.json against the route table and the docs' examples.

Driven by test_openapi.sh (and used by docs_examples.py for the answers its examples get):

    openapi_check.py document DOC             the document is well formed: openapi 3.1.0, every $ref
                                              resolves, every {param} of a path is declared
    openapi_check.py routes DOC ROUTES_C      every row of the route table (method, pattern) is an
                                              operation of DOC and every operation a row; their query
                                              parameters, access (open or not), body (none, JSON or
                                              text/csv) agree
    openapi_check.py examples DOC MD...       every curl example of the Markdown files calls a documented
                                              operation, its JSON body fits the operation's request
                                              schema and the answer it shows (`# -> STATUS JSON`) fits
                                              the documented answer of that status
    openapi_check.py seeds DOC FUZZ_DRIVER    the fuzzer's seed bodies (valid requests, one list per
                                              POST and PATCH route) fit the request schemas
    openapi_check.py statuses DOC SCRIPT...   every status the integration scripts expect of a
                                              documented operation (expect_status CODE METHOD PATH)
                                              is one the document gives it
    openapi_check.py captured DOC CALLS       the answers an integration test got (lib.sh req: lines
                                              of METHOD, path, status, answer file, and the body file
                                              and its Content-Type or "-", tab-separated) fit the
                                              documented answer of their operation and status, and a
                                              JSON body that got a 2xx fits the request schema
    openapi_check.py selftest                 the validator accepts and refuses what it should

The validator covers the part of JSON Schema 2020-12 the document uses (type, properties, required,
additionalProperties, items, enum, const, oneOf, anyOf, minimum, maximum, exclusiveMinimum,
exclusiveMaximum, minItems, maxItems, minLength, maxLength, $ref into the document); any other keyword
in the document is refused by `document`, so the validator never silently ignores a constraint. It
also validates the answers the docs show with `...` elisions (docs/API.md "Examples"): an elided
value fits anything, an object with `...` may leave required members out, an array with `...` is
checked on the elements shown, a string ending in `...` is a string.

Paths: the router's {name} segments are OpenAPI's {name} path templates, so a route pattern is its
path as written; a request path matches a template segment by segment ({name} = one non-empty
segment).
"""
import json
import os
import re
import shlex
import sys
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs_examples as dx  # noqa: E402

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
KNOWN = {"type", "properties", "required", "additionalProperties", "items", "enum", "const",
         "oneOf", "anyOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
         "minItems", "maxItems", "minLength", "maxLength", "$ref", "description", "format"}


# ---- the validator ---------------------------------------------------------------------------------------


class Partial:
    """An answer shown with elisions (docs_examples.Pat), as values the validator understands."""


class Elided(Partial):
    pass


class OpenObj(dict, Partial):
    pass


class OpenArr(list, Partial):
    pass


class StrPrefix(str, Partial):
    pass


def from_pattern(p):
    """docs_examples' pattern -> plain JSON values, with the Partial markers above."""
    if isinstance(p, dx.Any):
        return Elided()
    if p.kind == "num":
        d = Decimal(p.value)
        return int(d) if d == d.to_integral_value() and "." not in p.value and "e" not in \
            p.value.lower() else float(d)
    if p.kind == "str":
        return p.value
    if p.kind == "strprefix":
        return StrPrefix(p.value)
    if p.kind == "lit":
        return p.value
    if p.kind == "obj":
        d = OpenObj() if p.open else {}
        for k, sub in p.value:
            d[k] = from_pattern(sub)
        return d
    if p.kind == "arr":
        items = [from_pattern(x) for x in p.value]
        return OpenArr(items) if p.open else items
    raise ValueError("unknown pattern")


def type_of(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, (float, Decimal)):
        return "integer" if v == int(v) else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def type_ok(v, want):
    have = type_of(v)
    return have == want or (want == "number" and have == "integer")


class Validator:
    def __init__(self, doc):
        self.doc = doc

    def resolve(self, r):
        if not r.startswith("#/"):
            raise ValueError("only local $ref: %s" % r)
        node = self.doc
        for part in r[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def errors(self, v, s, path="$"):
        """The first mismatch of value v against schema s, as a sentence, or None."""
        if isinstance(v, Elided) or s is True or s == {}:
            return None
        if s is False:
            return "%s: not allowed" % path
        if "$ref" in s:
            r = self.errors(v, self.resolve(s["$ref"]), path)
            if r:
                return r
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(type_ok(v, x) for x in types):
                return "%s: %s expected, got %s %s" % (path, " or ".join(types), type_of(v),
                                                       json.dumps(v, default=str)[:80])
        if "const" in s and not isinstance(v, StrPrefix) and not eq(v, s["const"]):
            return "%s: %s expected, got %s" % (path, json.dumps(s["const"]),
                                                json.dumps(v, default=str)[:80])
        if "enum" in s:
            if isinstance(v, StrPrefix):
                if not any(isinstance(e, str) and e.startswith(v) for e in s["enum"]):
                    return "%s: none of %s starts with %r" % (path, s["enum"], str(v))
            elif not any(eq(v, e) for e in s["enum"]):
                return "%s: one of %s expected, got %s" % (path, json.dumps(s["enum"]),
                                                          json.dumps(v, default=str)[:80])
        if type_of(v) in ("integer", "number"):
            x = v
            if "minimum" in s and x < s["minimum"]:
                return "%s: %s < minimum %s" % (path, x, s["minimum"])
            if "maximum" in s and x > s["maximum"]:
                return "%s: %s > maximum %s" % (path, x, s["maximum"])
            if "exclusiveMinimum" in s and x <= s["exclusiveMinimum"]:
                return "%s: %s <= exclusiveMinimum %s" % (path, x, s["exclusiveMinimum"])
            if "exclusiveMaximum" in s and x >= s["exclusiveMaximum"]:
                return "%s: %s >= exclusiveMaximum %s" % (path, x, s["exclusiveMaximum"])
        if isinstance(v, str) and not isinstance(v, StrPrefix):
            if "minLength" in s and len(v) < s["minLength"]:
                return "%s: shorter than %d" % (path, s["minLength"])
            if "maxLength" in s and len(v) > s["maxLength"]:
                return "%s: longer than %d" % (path, s["maxLength"])
        if isinstance(v, list):
            if "minItems" in s and len(v) < s["minItems"] and not isinstance(v, OpenArr):
                return "%s: fewer than %d elements" % (path, s["minItems"])
            if "maxItems" in s and len(v) > s["maxItems"]:
                return "%s: more than %d elements" % (path, s["maxItems"])
            if "items" in s:
                for i, x in enumerate(v):
                    r = self.errors(x, s["items"], "%s[%d]" % (path, i))
                    if r:
                        return r
        if isinstance(v, dict):
            props = s.get("properties", {})
            if not isinstance(v, OpenObj):
                for k in s.get("required", []):
                    if k not in v:
                        return "%s: required member %r missing" % (path, k)
            for k, x in v.items():
                if k in props:
                    r = self.errors(x, props[k], "%s.%s" % (path, k))
                elif "additionalProperties" in s:
                    r = self.errors(x, s["additionalProperties"], "%s.%s" % (path, k))
                    if r and s["additionalProperties"] is False:
                        r = "%s: member %r is not in the schema" % (path, k)
                else:
                    r = None
                if r:
                    return r
        for key in ("oneOf", "anyOf"):
            if key in s:
                fits = [self.errors(v, sub, path) for sub in s[key]]
                n = sum(1 for f in fits if f is None)
                # a partial value may fit several branches; a whole one must fit exactly one oneOf
                if n == 0:
                    return "%s: fits none of %s (%s)" % (path, key, "; ".join(
                        f for f in fits if f)[:400])
                if key == "oneOf" and n > 1 and not has_partial(v):
                    return "%s: fits %d branches of oneOf" % (path, n)
        return None


def has_partial(v):
    if isinstance(v, Partial):
        return True
    if isinstance(v, dict):
        return any(has_partial(x) for x in v.values())
    if isinstance(v, list):
        return any(has_partial(x) for x in v)
    return False


def eq(a, b):
    if type_of(a) in ("integer", "number") and type_of(b) in ("integer", "number"):
        return a == b
    return type_of(a) == type_of(b) and a == b


# ---- the document -----------------------------------------------------------------------------------------


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal)


def template_rx(path):
    return re.compile("^" + re.sub(r"\\\{[^/]*?\\\}", "[^/]+", re.escape(path)) + "$")


def operations(doc):
    """[(METHOD, path template, operation)]"""
    out = []
    for path, item in doc.get("paths", {}).items():
        for m, o in item.items():
            if m in METHODS:
                out.append((m.upper(), path, o))
    return out


def find_op(doc, method, path):
    """The operation for a request path (no query), literal templates before parameter ones."""
    cands = []
    for m, tpl, o in operations(doc):
        if template_rx(tpl).match(path):
            cands.append((tpl.count("{"), m, tpl, o))
    cands.sort(key=lambda c: c[0])
    for _, m, tpl, o in cands:
        if m == method or (method == "HEAD" and m == "GET"):
            return tpl, o
    return (cands[0][2], None) if cands else (None, None)


def check_document(doc):
    problems = []
    if doc.get("openapi") != "3.1.0":
        problems.append("openapi is %r, not \"3.1.0\"" % doc.get("openapi"))
    v = Validator(doc)

    def walk(node, where, in_schema):
        if isinstance(node, dict):
            if "$ref" in node:
                try:
                    v.resolve(node["$ref"])
                except (KeyError, ValueError):
                    problems.append("%s: $ref %s does not resolve" % (where, node["$ref"]))
            for k, x in node.items():
                if in_schema and k not in KNOWN and k not in ("properties",):
                    problems.append("%s: schema keyword %r is not one the validator knows" %
                                    (where, k))
                if k == "properties":
                    for name, sub in x.items():
                        walk(sub, "%s.properties.%s" % (where, name), True)
                elif k in ("schema", "items", "additionalProperties"):
                    walk(x, "%s.%s" % (where, k), True)
                elif k in ("oneOf", "anyOf") and in_schema:
                    for i, sub in enumerate(x):
                        walk(sub, "%s.%s[%d]" % (where, k, i), True)
                elif k == "schemas" and where == "$.components":
                    for name, sub in x.items():
                        walk(sub, "%s.schemas.%s" % (where, name), True)
                elif not in_schema:
                    walk(x, "%s.%s" % (where, k), False)
        elif isinstance(node, list) and not in_schema:
            for i, x in enumerate(node):
                walk(x, "%s[%d]" % (where, i), False)

    walk(doc, "$", False)
    for m, tpl, o in operations(doc):
        declared = set()
        for p in o.get("parameters", []):
            p = v.resolve(p["$ref"]) if "$ref" in p else p
            if p.get("in") == "path":
                declared.add(p["name"])
        for name in re.findall(r"\{([^}]*)\}", tpl):
            if name not in declared:
                problems.append("%s %s: path parameter {%s} is not declared" % (m, tpl, name))
        if not o.get("responses"):
            problems.append("%s %s: no responses" % (m, tpl))
    return problems


# ---- the route table ------------------------------------------------------------------------------------

ROW_RE = re.compile(r'\{\s*"([A-Z]+)"\s*,\s*"([^"]+)"\s*,\s*(\w+)\s*,\s*([^,]+?)\s*,\s*(ROUTE_\w+)\s*,'
                    r'\s*(NULL|"[^"]*")\s*,\s*(NULL|"[^"]*")\s*\}', re.S)


def route_table(path):
    """[(method, pattern, handler, body cap text, access, query list, raw type)] of ROUTES."""
    with open(path, encoding="utf-8") as f:
        src = f.read()
    body = src[src.index("const route ROUTES[]"):]
    body = body[:body.index("};")]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    rows = []
    for m in ROW_RE.finditer(body):
        query = [] if m.group(6) == "NULL" else m.group(6).strip('"').split()
        raw = None if m.group(7) == "NULL" else m.group(7).strip('"')
        rows.append((m.group(1), m.group(2), m.group(3), m.group(4), m.group(5), query, raw))
    n_rows = body.count('{"')
    if not rows or len(rows) != n_rows:
        raise SystemExit("%s: read %d route rows of %d" % (path, len(rows), n_rows))
    return rows


def check_routes(doc, rows):
    v = Validator(doc)
    problems = []
    ops = {(m, tpl): o for m, tpl, o in operations(doc)}
    table = {(r[0], r[1]): r for r in rows}
    for key in table:
        if key not in ops:
            problems.append("route %s %s is in the route table but not in the document" % key)
    for key in ops:
        if key not in table:
            problems.append("operation %s %s is in the document but not in the route table" % key)
    for key, r in table.items():
        o = ops.get(key)
        if o is None:
            continue
        where = "%s %s" % key
        params = [v.resolve(p["$ref"]) if "$ref" in p else p for p in o.get("parameters", [])]
        qdoc = sorted(p["name"] for p in params if p.get("in") == "query")
        if qdoc != sorted(r[5]):
            problems.append("%s: query parameters %s in the table, %s in the document" %
                            (where, sorted(r[5]), qdoc))
        is_open = r[4] == "ROUTE_OPEN"
        if is_open != (o.get("security") == []):
            problems.append("%s: %s in the table, but the document's security is %s" %
                            (where, r[4], json.dumps(o.get("security"))))
        if o.get("x-access") != {"ROUTE_OPEN": "open", "ROUTE_TOKEN": "token",
                                 "ROUTE_ADMIN": "admin"}[r[4]]:
            problems.append("%s: %s in the table, x-access %r in the document" %
                            (where, r[4], o.get("x-access")))
        rb = o.get("requestBody")
        has_body = r[3].strip() != "0"
        if has_body != (rb is not None):
            problems.append("%s: body cap %s in the table, %s in the document" %
                            (where, r[3], "a requestBody" if rb else "no requestBody"))
        if rb is not None:
            media = sorted(rb.get("content", {}))
            want = [r[6]] if r[6] else ["application/json"]
            if media != want:
                problems.append("%s: body media %s in the table, %s in the document" %
                                (where, want, media))
        if "{" in r[1] and "404" not in o.get("responses", {}):
            problems.append("%s: a route with an id answers 404, not documented" % where)
        if not is_open and "401" not in o.get("responses", {}):
            problems.append("%s: a token route answers 401, not documented" % where)
        if has_body and "413" not in o.get("responses", {}) and r[6] is None:
            problems.append("%s: a route with a body answers 413, not documented" % where)
    return problems


# ---- curl examples ---------------------------------------------------------------------------------------

URL_RE = re.compile(r"^(?:https?://)?(?:\$\{?U\}?|localhost:8080|127\.0\.0\.1:8080|\$\{?URL\}?)(/.*)?$")
CURL_OPTS_WITH_ARG = {"-X", "--request", "-d", "--data", "--data-binary", "--data-raw",
                      "--data-urlencode", "-H", "--header", "-o", "--output", "-w",
                      "--write-out", "-m", "--max-time", "--connect-timeout", "-D",
                      "--dump-header", "-u", "--user", "-F", "--form", "-T", "--upload-file",
                      "-b", "-c", "-A", "-e", "--retry", "-K", "--config"}
DATA_OPTS = {"-d", "--data", "--data-binary", "--data-raw"}


class Call:
    def __init__(self):
        self.method = None
        self.url = None
        self.data = None  # the body text as written, or None
        self.data_file = False  # @file
        self.headers = []
        self.output_elsewhere = False  # -o / -w / -I: what it prints is not the answer
        self.literal = False  # the body as sent (shell variables expanded)


def curl_calls(text):
    """The curl invocations of a shell statement (commands split at | ; && || and newlines), each
    with whether its output is piped or captured elsewhere, as (Call, piped)."""
    try:
        lex = shlex.shlex(text.replace("\\\n", " "), posix=True, punctuation_chars=";&|()<>")
        lex.whitespace_split = True
        lex.commenters = ""
        toks = list(lex)
    except ValueError:
        return []
    cmds, cur = [], []
    for tk in toks:
        if tk in (";", "&&", "||", "|", "&", "(", ")", "$(", "\n"):
            cmds.append((cur, tk))
            cur = []
        else:
            cur.append(tk)
    cmds.append((cur, None))
    out = []
    for i, (words, sep) in enumerate(cmds):
        if "curl" not in words:
            continue
        words = words[words.index("curl") + 1:]
        c = Call()
        k = 0
        while k < len(words):
            w = words[k]
            if w in CURL_OPTS_WITH_ARG and k + 1 < len(words):
                a = words[k + 1]
                if w in ("-X", "--request"):
                    c.method = a
                elif w in DATA_OPTS:
                    c.data = a
                    c.data_file = a.startswith("@")
                elif w in ("-H", "--header"):
                    c.headers.append(a)
                elif w in ("-w", "--write-out") or (w in ("-o", "--output") and a != "-"):
                    c.output_elsewhere = True  # what it prints is not the answer
                k += 2
                continue
            if w in ("-I", "--head"):
                c.method = "HEAD"
                c.output_elsewhere = True
            elif not w.startswith("-") and c.url is None and URL_RE.match(w.split("?")[0]):
                c.url = w
            k += 1
        if c.url is None:
            continue
        if c.method is None:
            c.method = "POST" if c.data is not None else "GET"
        piped = sep in ("|", ">", "<") or (sep == ")" and i > 0)
        # output redirected to a file: `> f`
        if ">" in words:
            piped = True
        out.append((c, piped))
    return out


def url_path(url):
    m = URL_RE.match(url.split("?")[0])
    return (m.group(1) or "/") if m else None


def static_path(path):
    """True for the dashboard's static files (web/), which are not routes."""
    return path == "/" or re.match(r"^/[A-Za-z0-9._-]+\.(html|css|js|svg|png|ico|txt)$", path)


def answer_schema(doc, o, status):
    """The schema of the answer with this status (a string, e.g. "201"), or (None, why)."""
    v = Validator(doc)
    resp = o.get("responses", {}).get(status)
    if resp is None:
        return None, "status %s is not documented" % status
    if "$ref" in resp:
        resp = v.resolve(resp["$ref"])
    content = resp.get("content", {})
    if "application/json" not in content:
        return None, None  # documented, not JSON (text, event stream, no body)
    return content["application/json"]["schema"], None


def json_or_none(text):
    try:
        return json.loads(text, parse_float=Decimal)
    except ValueError:
        return None


STATS = {"bodies": 0}  # request bodies checked (the summary line of `examples`)


def check_call(doc, c, status=None, answer=None, where="", unknown_ok=False):
    """Problems of one call against the document: the operation exists, the body fits, the answer
    (a value, maybe partial) fits the answer schema of its status. status None: the doc states
    none, so any documented 2xx will do."""
    v = Validator(doc)
    problems = []
    path = url_path(c.url)
    if path is None or static_path(path):
        return problems
    path = re.sub(r"\$\{?\w+\}?", "1", path)  # $SID, ${JOB} -> an id
    tpl, o = find_op(doc, c.method, path)
    if o is None and unknown_ok:
        return problems  # the dispatcher's 404 or 405: not an operation
    if o is None:
        if tpl is None:
            return ["%s: %s %s is not a path of the document" % (where, c.method, path)]
        return ["%s: %s %s: the document has no %s operation on %s" % (where, c.method, path,
                                                                       c.method, tpl)]
    if c.data is not None and not c.data_file and "requestBody" in o:
        content = o["requestBody"].get("content", {})
        ctype = next((h.split(":", 1)[1].strip() for h in c.headers
                      if h.lower().startswith("content-type:")), "application/json")
        literal = c.literal or "$" not in c.data  # as written in a doc, $VAR is not JSON yet
        if "application/json" in content and literal and ctype == "application/json":
            body = json_or_none(c.data)
            if body is None:
                pass  # a deliberately malformed body (a 400 example)
            elif status is None or status.startswith("2"):
                STATS["bodies"] += 1
                r = v.errors(body, content["application/json"]["schema"], "body")
                if r:
                    problems.append("%s: %s %s: the request body does not fit the document: %s" %
                                    (where, c.method, tpl, r))
    if answer is not None or status is not None:
        statuses = [status] if status else sorted(s for s in o.get("responses", {})
                                                  if s.startswith("2"))
        results = []
        for st in statuses:
            schema, why = answer_schema(doc, o, st)
            if why:
                results.append(why)
            elif schema is None or answer is None:
                results.append(None)
            else:
                results.append(v.errors(answer, schema, "answer"))
        if results and all(r is not None for r in results):
            problems.append("%s: %s %s %s: %s" % (where, c.method, tpl, status or "2xx",
                                                  "; ".join(results)))
    return problems


def check_examples(doc, md_files):
    problems, n_calls, n_answers = [], 0, 0
    for md in md_files:
        for st in dx.document(md):
            calls = curl_calls(st.text)
            if not calls:
                continue
            status, answer = None, None
            if st.expect is not None:
                text = " ".join(st.expect).strip()
                m = re.match(r"^(\d{3})(?:\s+|$)(.*)$", text, re.S)
                if m:
                    status, text = m.group(1), m.group(2).strip()
                if text:
                    try:
                        answer = from_pattern(dx.parse_expectation(text))
                    except ValueError:
                        answer = None
            for k, (c, piped) in enumerate(calls):
                last = k == len(calls) - 1
                st_k = status if last else None
                ans_k = answer if last and not piped and not c.output_elsewhere else None
                if c.output_elsewhere or piped:
                    st_k = st_k if (c.output_elsewhere and last) else None
                n_calls += 1
                n_answers += ans_k is not None
                problems += check_call(doc, c, st_k, ans_k, "%s:%d" % (md, st.line))
    return problems, n_calls, n_answers


def check_captured(doc, args, status, answer_text, where=""):
    """A call the docs test made (curl's argument list) and what it got: the answer must fit the
    documented answer of its status (used by docs_examples.py)."""
    c = Call()
    c.literal = True
    k = 0
    while k < len(args):
        w = args[k]
        if w in CURL_OPTS_WITH_ARG and k + 1 < len(args):
            if w in ("-X", "--request"):
                c.method = args[k + 1]
            elif w in DATA_OPTS:
                c.data, c.data_file = args[k + 1], args[k + 1].startswith("@")
            elif w in ("-H", "--header"):
                c.headers.append(args[k + 1])
            elif w in ("-o", "--output", "-w", "--write-out"):
                c.output_elsewhere = True  # what it printed is not the answer
            k += 2
            continue
        if w in ("-I", "--head"):
            c.method = "HEAD"
        elif re.match(r"^https?://", w):
            c.url = re.sub(r"^https?://[^/]+", "$U", w)
        k += 1
    if c.url is None:
        return []
    c.method = c.method or ("POST" if c.data is not None else "GET")
    if status == "000":
        return []
    text = answer_text or ""
    if text.startswith("HTTP/"):
        text = re.split(r"\r?\n\r?\n", text, maxsplit=1)[-1]
    answer = json_or_none(text) if text.strip() else None
    if c.method == "HEAD" or c.output_elsewhere:
        answer = None
    return check_call(doc, c, status, answer, where)


def check_seeds(doc, fuzz_path):
    """fuzz_driver.SEEDS: valid bodies, which must fit their operation's request schema ("$SILO"
    placeholders read as an id)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fuzz_driver", fuzz_path)
    fz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fz)
    v = Validator(doc)
    problems, n = [], 0
    for key, bodies in fz.SEEDS.items():
        m, path = key.split(" ", 1)
        o = doc.get("paths", {}).get(path, {}).get(m.lower())
        if o is None:
            problems.append("%s: a fuzz seed for an operation the document lacks" % key)
            continue
        sch = o.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if sch is None:
            continue
        for k, b in enumerate(bodies):
            text = re.sub(r'"\$SILO2?"', "1", json.dumps(b))
            r = v.errors(json.loads(text, parse_float=Decimal), sch, "body")
            n += 1
            if r:
                problems.append("%s seed %d: %s" % (key, k, r))
    return problems, n


EXPECT_RE = re.compile(r"expect_status\s+(\d{3})\s+([A-Z]+)\s+[\"']?(/[^\s\"'?]*)")


def check_statuses(doc, scripts):
    """expect_status lines of the integration scripts: a status a test pins on a documented
    operation must be documented (405 is the answer to an operation that is not there)."""
    problems, n = [], 0
    for f in scripts:
        with open(f, encoding="utf-8") as fh:
            for k, ln in enumerate(fh, 1):
                m = EXPECT_RE.search(ln)
                if not m:
                    continue
                st, method, path = m.groups()
                tpl, o = find_op(doc, method, re.sub(r"\$\{?\w+\}?", "1", path))
                if o is None or st == "405":
                    continue
                n += 1
                if st not in o.get("responses", {}):
                    problems.append("%s:%d: %s %s answers %s, not documented" %
                                    (f, k, method, tpl, st))
    return problems, n


def check_captured_file(doc, calls):
    problems, n = [], 0
    with open(calls, encoding="utf-8", errors="replace") as f:
        for k, ln in enumerate(f, 1):
            parts = ln.rstrip("\n").split("\t")
            if len(parts) == 4:
                parts += ["-", "-"]
            if len(parts) != 6 or not re.match(r"^\d{3}$", parts[2]):
                continue
            method, path, status, afile, sent, ctype = parts
            c = Call()
            c.method, c.url, c.literal = method, "$U" + path, True
            if sent != "-":
                with open(sent, encoding="utf-8", errors="replace") as sf:
                    c.data = sf.read()
                c.headers.append("Content-Type: " + ctype)
            if not path.startswith("/") or "%" in path or "//" in path or "/." in path:
                continue  # hostile paths: the dispatcher's answers
            try:
                with open(afile, encoding="utf-8", errors="replace") as af:
                    text = af.read()
            except FileNotFoundError:
                continue
            answer = json_or_none(text) if text.strip() and method != "HEAD" else None
            n += 1
            problems += check_call(doc, c, status, answer, "request %d" % k, unknown_ok=True)
    return problems, n


# ---- self-test ----------------------------------------------------------------------------------------------


def selftest():
    doc = {"components": {"schemas": {"E": {"oneOf": [
        {"type": "object", "properties": {"type": {"const": "a"}, "x": {"type": "number"}},
         "required": ["type", "x"], "additionalProperties": False},
        {"type": "object", "properties": {"type": {"const": "b"}, "e": {"$ref": "#/components/schemas/E"}},
         "required": ["type", "e"], "additionalProperties": False}]}}}}
    v = Validator(doc)
    s = {"$ref": "#/components/schemas/E"}
    P = lambda t: from_pattern(dx.parse_expectation(t))  # noqa: E731
    good = [({"type": "a", "x": 1}, s), ({"type": "b", "e": {"type": "a", "x": 2.5}}, s),
            (P('{"type":"b",...}'), s), (P('{"type":"a","x":1.5...}'), s),
            ([1, 2], {"type": "array", "items": {"type": "integer"}, "maxItems": 2}),
            (P('{"s":"ab..."}'), {"type": "object", "properties": {"s": {"enum": ["abc"]}}}),
            (None, {"type": ["number", "null"]})]
    bad = [({"type": "a"}, s), ({"type": "a", "x": 1, "y": 2}, s), ({"type": "c"}, s),
           ({"type": "b", "e": {"type": "a", "x": "1"}}, s),
           (P('{"type":"a",...}'), {"type": "string"}),
           ([1, 2, 3], {"type": "array", "maxItems": 2}), (0, {"type": "number", "exclusiveMinimum": 0}),
           (1.5, {"type": "integer"}), ("x", {"enum": ["y"]}), (P('{"s":"zz..."}'),
                                                               {"type": "object", "properties": {"s": {"enum": ["abc"]}}})]
    ok = True
    for val, sch in good:
        r = v.errors(val, sch)
        if r:
            print("selftest: %r should fit: %s" % (val, r))
            ok = False
    for val, sch in bad:
        if v.errors(val, sch) is None:
            print("selftest: %r should not fit %s" % (val, sch))
            ok = False
    calls = curl_calls("curl -s -X POST \"$U/v1/silos/$SID/charges\" -H 'Content-Type: application/json' "
                       "-d '{\"a\": 1}' | jq .id")
    if len(calls) != 1 or calls[0][0].method != "POST" or not calls[0][1] or \
            url_path(calls[0][0].url) != "/v1/silos/$SID/charges":
        print("selftest: curl_calls misread a piped POST")
        ok = False
    return 0 if ok else 1


def main(argv):
    if len(argv) == 2 and argv[1] == "selftest":
        return selftest()
    if len(argv) == 4 and argv[1] == "captured":
        problems, n = check_captured_file(load(argv[2]), argv[3])
        for p in problems:
            print("  " + p)
        print("  %d answers fit openapi/openapi.json, %d do not" % (n - len(problems),
                                                                  len(problems)))
        return 1 if problems else 0
    if len(argv) >= 3 and argv[1] == "statuses":
        problems, n = check_statuses(load(argv[2]), argv[3:])
        for p in problems:
            print("  " + p)
        print("  statuses: %d expected statuses, %d problems" % (n, len(problems)))
        return 1 if problems else 0
    if len(argv) == 4 and argv[1] == "seeds":
        problems, n = check_seeds(load(argv[2]), argv[3])
        for p in problems:
            print("  " + p)
        print("  seeds: %d bodies, %d problems" % (n, len(problems)))
        return 1 if problems else 0
    if len(argv) >= 3 and argv[1] in ("document", "routes", "examples"):
        doc = load(argv[2])
        if argv[1] == "document":
            problems = check_document(doc)
            what = "%d operations" % len(operations(doc))
        elif argv[1] == "routes":
            rows = route_table(argv[3])
            problems = check_routes(doc, rows)
            what = "%d routes, %d operations" % (len(rows), len(operations(doc)))
        else:
            problems, n, na = check_examples(doc, argv[3:])
            what = "%d curl calls in %d files, %d JSON bodies, %d shown answers" % (
                n, len(argv) - 3, STATS["bodies"], na)
        for p in problems:
            print("  " + p)
        print("  %s: %s, %d problems" % (argv[1], what, len(problems)))
        return 1 if problems else 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
