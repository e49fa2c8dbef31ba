#!/usr/bin/env python3
"""docs_examples.py: runs the shell examples of a Markdown document and checks what they print.

Driven by test_docs_examples.sh (which starts a fresh daemon per document); not run on its own.

    docs_examples.py flags DOC                  the dpsilod flags the document asks for (see below)
    docs_examples.py run DOC URL WORKDIR        runs the examples in WORKDIR against URL, checks them;
                                                exit 0 when every check passed

The convention it enforces (docs/API.md "Examples"):

* Every ```sh block of the document is run, in document order, in one bash process (so a variable set
  in one block is seen by the next), with WORKDIR as the current directory. A block whose previous
  non-blank line is `<!-- docs-test: skip (why) -->` is not run (set-up commands, benchmarks).
* `make run [AUTH=on|off] [RUN_FLAGS="..."] [&]` is not run: the test has already started the daemon
  the way `make run` does (`--auth off` unless AUTH or RUN_FLAGS says otherwise, then RUN_FLAGS), on
  a fresh database whose directory is WORKDIR/var, so `$(cat var/admin.token)` reads its admin
  token.
* `localhost:8080` and `127.0.0.1:8080` are replaced by the address of the test's daemon.
* A statement (a command with its continuation lines and multi-line quoted strings) passes when it
  exits 0 and every curl in it gets a 2xx answer, unless the document states another status.
* What a statement gives is stated by a comment that starts with `# -> `, on the statement's last
  line or on the lines right after it, optionally continued on the following comment lines that start
  with `#` and at least two spaces (joined with one space):
      # -> 201 {"id":1,"name":"a",...}
  an optional HTTP status, then the JSON of the answer (of the statement's last curl, or the
  statement's standard output when it runs no curl). A ```json block directly after a ```sh block
  states the answer of that block's last statement the same way. In the JSON:
    - `...` (or `…`) among the members of an object or the elements of an array: more may follow;
      without it, the members are exactly those shown (in any order), the elements exactly those;
    - a number is compared to the digits shown (the answer, rounded to as many digits, is equal);
      `5.6318...` means the answer starts with those digits (within one unit of the last one);
    - a string ending in `...` matches any string that starts with the text before it; `"..."`
      matches any value.
* Every answer a curl gets from an API route (not only the shown ones) must fit the answer that
  openapi/openapi.json documents for its operation and status (openapi_check.py check_captured):
  an undocumented status, or a member, type or value the schema does not allow, fails the statement.
"""
import json
import os
import re
import subprocess
import sys
from decimal import Decimal

SKIP_RE = re.compile(r"^<!--\s*docs-test:\s*skip\b.*-->\s*$")
MAKE_RUN_RE = re.compile(r"^\s*make\s+run\b(.*?)&?\s*$", re.S)
HOSTS = ("localhost:8080", "127.0.0.1:8080")
ELLIPSIS = ("...", "\u2026")


# ---- Markdown and shell ----------------------------------------------------------------------------


class Stmt:
    def __init__(self, text, line):
        self.text = text  # the shell text, comments removed
        self.line = line  # first line in the document (1-based)
        self.expect = None  # list of expectation text pieces, or None
        self.expect_line = None
        self.collecting = False  # still reading continuation lines of the expectation


def blocks(path):
    """Yields (kind, first_line, lines) for the fenced blocks to run ("sh") and the json blocks that
    directly follow a sh block ("json")."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i, prev_nonblank, last_sh_end = 0, "", -2
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            if lines[i].strip():
                prev_nonblank = lines[i]
            i += 1
            continue
        info, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[start + 1 : j]
        if info == "sh" and not SKIP_RE.match(prev_nonblank.strip()):
            yield ("sh", start + 2, body)
            last_sh_end = j
        elif info == "json" and start == last_sh_end + 1:
            yield ("json", start + 2, body)
        prev_nonblank = lines[j] if j < len(lines) else ""
        i = j + 1


def split_statements(body, first_line):
    """Splits a sh block into statements and their `# -> ` expectations."""
    stmts, cur, cur_line, state = [], [], None, None
    for k, raw in enumerate(body):
        lineno = first_line + k
        if state is None and not cur:
            s = raw.strip()
            if not s:
                if stmts:
                    stmts[-1].collecting = False
                continue
            if s.startswith("#"):
                last = stmts[-1] if stmts else None
                if s.startswith("# ->") and last is not None and last.expect is None:
                    last.expect, last.expect_line, last.collecting = [s[4:].strip()], lineno, True
                elif last is not None and last.collecting and re.match(r"^#\s{2,}\S", s):
                    last.expect.append(s[1:].strip())
                elif last is not None:
                    last.collecting = False
                continue
        code, comment, i = raw, None, 0
        while i < len(raw):
            c = raw[i]
            if state == "'":
                if c == "'":
                    state = None
            elif state == '"':
                if c == "\\":
                    i += 1
                elif c == '"':
                    state = None
            elif c == "'":
                state = "'"
            elif c == '"':
                state = '"'
            elif c == "\\":
                i += 1
            elif c == "#" and (i == 0 or raw[i - 1] in " \t;"):
                code, comment = raw[:i], raw[i:].strip()
                break
            i += 1
        if not cur:
            cur_line = lineno
        cur.append(code)
        if state is None and not code.rstrip().endswith("\\"):
            st = Stmt("\n".join(cur).rstrip(), cur_line)
            if comment is not None and comment.startswith("# ->"):
                st.expect, st.expect_line, st.collecting = [comment[4:].strip()], lineno, True
            stmts.append(st)
            cur = []
    if cur:
        stmts.append(Stmt("\n".join(cur), cur_line))
    return stmts


def document(path):
    """The statements of a document, with the json blocks attached to the statement before them."""
    out = []
    for kind, line, body in blocks(path):
        if kind == "sh":
            out.extend(split_statements(body, line))
        elif out:
            out[-1].expect, out[-1].expect_line = [" ".join(x.strip() for x in body)], line
    return out


def make_run_flags(args):
    """The dpsilod flags of `make run ARGS`: --auth off (the Makefile's default) unless AUTH=on|off
    or RUN_FLAGS says otherwise, then RUN_FLAGS."""
    auth, extra = "off", ""
    a = re.search(r"\bAUTH=(\w+)", args)
    if a:
        auth = a.group(1)
    f = re.search(r"RUN_FLAGS=(\"([^\"]*)\"|'([^']*)'|(\S+))", args)
    if f:
        extra = next(g for g in f.groups()[1:] if g is not None)
    if re.search(r"(^|\s)--auth(\s|=|$)", extra):
        return extra.strip()
    return ("--auth %s %s" % (auth, extra)).strip()


def daemon_flags(stmts):
    for st in stmts:
        m = MAKE_RUN_RE.match(st.text)
        if m:
            return make_run_flags(m.group(1))
    return "--auth off"


# ---- tolerant JSON of the expectations ---------------------------------------------------------------


class Any:
    pass


class Pat:
    def __init__(self, kind, value, open_=False):
        self.kind, self.value, self.open = kind, value, open_


class Parser:
    def __init__(self, text):
        self.s, self.i = text, 0

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\r\n":
            self.i += 1

    def ell(self):
        self.ws()
        for e in ELLIPSIS:
            if self.s.startswith(e, self.i):
                self.i += len(e)
                return True
        return False

    def fail(self, what):
        raise ValueError("%s at offset %d of %r" % (what, self.i, self.s))

    def value(self):
        self.ws()
        if self.ell():
            return Any()
        c = self.s[self.i : self.i + 1]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        if c == '"':
            txt = self.string()
            for e in ELLIPSIS:
                if txt == e:
                    return Any()
                if txt.endswith(e):
                    return Pat("strprefix", txt[: -len(e)])
            return Pat("str", txt)
        m = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?").match(self.s, self.i)
        if m:
            self.i = m.end()
            return Pat("num", m.group(0), self.ell())
        for lit, v in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(lit, self.i):
                self.i += len(lit)
                return Pat("lit", v)
        self.fail("a JSON value expected")

    def string(self):
        dec = json.JSONDecoder()
        try:
            v, end = dec.raw_decode(self.s, self.i)
        except ValueError:
            self.fail("a string expected")
        self.i = end
        return v

    def obj(self):
        self.i += 1
        members, open_ = [], False
        while True:
            self.ws()
            if self.s.startswith("}", self.i):
                self.i += 1
                return Pat("obj", members, open_)
            if self.ell():
                open_ = True
            else:
                self.ws()
                key = self.string()
                self.ws()
                if not self.s.startswith(":", self.i):
                    self.fail("':' expected")
                self.i += 1
                members.append((key, self.value()))
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
            elif not self.s.startswith("}", self.i):
                self.fail("',' or '}' expected")

    def arr(self):
        self.i += 1
        items, open_ = [], False
        while True:
            self.ws()
            if self.s.startswith("]", self.i):
                self.i += 1
                return Pat("arr", items, open_)
            if self.ell():
                open_ = True
            else:
                items.append(self.value())
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
            elif not self.s.startswith("]", self.i):
                self.fail("',' or ']' expected")


def parse_expectation(text):
    self = Parser(text)
    v = self.value()
    self.ws()
    if self.i != len(text):
        self.fail("trailing text")
    return v


def num_matches(shown, elided, actual):
    s = Decimal(shown)
    unit = Decimal(1).scaleb(s.as_tuple().exponent)  # one unit of the last digit shown
    diff = abs(Decimal(actual) - s)
    return diff < unit if elided else diff <= unit / 2


def match(p, a, path="$"):
    """None when actual a matches pattern p, else a sentence saying where it does not."""
    if isinstance(p, Any):
        return None
    if p.kind == "num":
        if isinstance(a, bool) or not isinstance(a, (int, Decimal)):
            return "%s: %s shown, got %s" % (path, p.value, json.dumps(a, default=str))
        if not num_matches(p.value, p.open, a):
            return "%s: %s%s shown, got %s" % (path, p.value, "..." if p.open else "", a)
        return None
    if p.kind == "str":
        return None if a == p.value else "%s: %r shown, got %r" % (path, p.value, a)
    if p.kind == "strprefix":
        ok = isinstance(a, str) and a.startswith(p.value)
        return None if ok else "%s: %r... shown, got %r" % (path, p.value, a)
    if p.kind == "lit":
        return None if a is p.value else "%s: %s shown, got %r" % (path, json.dumps(p.value), a)
    if p.kind == "obj":
        if not isinstance(a, dict):
            return "%s: an object shown, got %s" % (path, type(a).__name__)
        for k, sub in p.value:
            if k not in a:
                return "%s: member %r shown, absent" % (path, k)
            r = match(sub, a[k], "%s.%s" % (path, k))
            if r:
                return r
        extra = set(a) - {k for k, _ in p.value}
        if extra and not p.open:
            return "%s: members %s not shown (add ... to elide them)" % (path, sorted(extra))
        return None
    if p.kind == "arr":
        if not isinstance(a, list):
            return "%s: an array shown, got %s" % (path, type(a).__name__)
        if len(a) < len(p.value) or (len(a) != len(p.value) and not p.open):
            return "%s: %d elements shown, got %d" % (path, len(p.value), len(a))
        for k, sub in enumerate(p.value):
            r = match(sub, a[k], "%s[%d]" % (path, k))
            if r:
                return r
        return None
    return "%s: unknown pattern" % path


# ---- running -----------------------------------------------------------------------------------------

PRELUDE = r"""
# docs_examples.py: every curl records its status and answer for the checks
curl() {
    local out rc st
    out=$(mktemp "$DOCTEST_CAP/answer.XXXXXX")
    printf '%s\0' "$@" >"$out.args"
    command curl -D "$out.hdr" "$@" >"$out"
    rc=$?
    cat "$out"
    st=$(awk '/^HTTP\//{ s = $2 } END { print s }' "$out.hdr" 2>/dev/null)
    printf '%s %s %s\n' "${st:-000}" "$rc" "$out" >>"$DOCTEST_CAP/$DOCTEST_N.curls"
    return $rc
}
"""


def script(stmts, hostport, cap):
    parts = ["DOCTEST_CAP=%s" % sh_quote(cap), PRELUDE]
    for n, st in enumerate(stmts):
        text = st.text
        if MAKE_RUN_RE.match(text):
            text = ": started by the test: %s" % sh_quote(" ".join(text.split()))
        for h in HOSTS:
            text = text.replace(h, hostport)
        parts.append(
            "DOCTEST_N=%d\n{ %s\n} >%s/%d.out 2>%s/%d.err\necho $? >%s/%d.rc\n"
            % (n, text, sh_quote(cap), n, sh_quote(cap), n, sh_quote(cap), n)
        )
    return "\n".join(parts)


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None


def answer_json(text):
    if text.startswith("HTTP/"):  # curl -i: the headers come first
        text = re.split(r"\r?\n\r?\n", text, maxsplit=1)[-1]
    return json.loads(text, parse_float=Decimal, parse_int=Decimal)


OPENAPI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "openapi",
                       "openapi.json")


def answers_vs_openapi(api, path, status):
    """Problems of one captured curl call (its arguments in path.args) against the OpenAPI
    document."""
    import openapi_check

    raw = None
    try:
        with open(path + ".args", "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    args = [a.decode("utf-8", "replace") for a in raw.split(b"\0")[:-1]]
    return openapi_check.check_captured(api, args, status, read(path), "the answer")


def run(doc, url, workdir):
    import openapi_check

    api = openapi_check.load(OPENAPI)
    stmts = document(doc)
    if not stmts:
        print("  (no examples)")
        return 0
    cap = os.path.join(workdir, ".doctest")
    os.makedirs(cap, exist_ok=True)
    hostport = re.sub(r"^https?://", "", url).rstrip("/")
    sc = os.path.join(cap, "script.sh")
    with open(sc, "w", encoding="utf-8") as f:
        f.write(script(stmts, hostport, cap))
    subprocess.run(["bash", sc], cwd=workdir, timeout=600, check=False)
    fails = 0
    for n, st in enumerate(stmts):
        where = "%s:%d" % (doc, st.line)
        first = st.text.split("\n")[0][:90]
        problems = []
        rc = (read(os.path.join(cap, "%d.rc" % n)) or "").strip()
        if rc != "0":
            err = (read(os.path.join(cap, "%d.err" % n)) or "").strip()
            problems.append("exit status %s %s" % (rc or "(not run)", err[:300]))
        curls = []
        for ln in (read(os.path.join(cap, "%d.curls" % n)) or "").splitlines():
            status, crc, path = ln.split(" ", 2)
            curls.append((status, crc, path))
        want_status, want_body = None, None
        if st.expect is not None:
            text = " ".join(st.expect).strip()
            m = re.match(r"^(\d{3})(?:\s+|$)(.*)$", text, re.S)
            if m:
                want_status, text = m.group(1), m.group(2).strip()
            if text:
                try:
                    want_body = parse_expectation(text)
                except ValueError as e:
                    problems.append("the expectation at line %d is not JSON: %s" % (st.expect_line, e))
        for k, (status, crc, path) in enumerate(curls):
            last = k == len(curls) - 1
            if last and want_status is not None:
                if status != want_status:
                    problems.append("curl answered %s, the doc says %s: %s"
                                    % (status, want_status, (read(path) or "")[:300]))
            elif not status.startswith("2"):
                problems.append("curl answered %s (not 2xx, and the doc states no status): %s"
                                % (status, (read(path) or "")[:300]))
        for status, crc, path in curls:
            problems.extend(answers_vs_openapi(api, path, status))
        if want_status is not None and not curls:
            problems.append("the doc states status %s but the statement ran no curl" % want_status)
        if want_body is not None:
            got_text = read(curls[-1][2]) if curls else read(os.path.join(cap, "%d.out" % n))
            try:
                got = answer_json(got_text or "")
            except ValueError:
                problems.append("the answer is not JSON: %r" % (got_text or "")[:300])
            else:
                r = match(want_body, got)
                if r:
                    problems.append("answer differs from the doc (line %d): %s" % (st.expect_line, r))
        if problems:
            fails += 1
            print("  FAIL: %s %s" % (where, first))
            for p in problems:
                print("        %s" % p)
        else:
            shown = " (answer checked)" if want_body is not None else ""
            print("  ok:   %s %s%s" % (where, first, shown))
    print("  %s: %d statements, %d failed" % (doc, len(stmts), fails))
    return 1 if fails else 0


def selftest():
    """The matcher itself: what it must accept and what it must refuse."""
    D = lambda t: json.loads(t, parse_float=Decimal, parse_int=Decimal)
    good = [
        ('{"a":1,"b":"x"}', '{"b":"x","a":1}'),
        ('{"a":0.7882299087818274}', '{"a":0.78822990878182742}'),
        ('{"d":1e-05}', '{"d":1.0000000000000001e-5}'),
        ('{"e":5.6318...,...}', '{"e":5.6318096670204358,"f":1}'),
        ('{"t":"dps_..."}', '{"t":"dps_ab12"}'),
        ('{"r":"..."}', '{"r":{"x":1}}'),
        ('[1,...]', '[1,2,3]'),
        ('{"o":33.87}', '{"o":33.86996229187132}'),
    ]
    bad = [
        ('{"e":5.6318096670204314}', '{"e":5.6318096670204358}'),
        ('{"a":1}', '{"a":1,"b":2}'),
        ('{"a":1,...}', '{"b":1}'),
        ('[1,2]', '[1,2,3]'),
        ('{"e":5.63...}', '{"e":5.64}'),
        ('{"s":"abc"}', '{"s":"abd"}'),
        ('{"n":null}', '{"n":0}'),
    ]
    ok = True
    for args, want in (("", "--auth off"), (' RUN_FLAGS="--auth on" ', "--auth on"),
                       (" AUTH=on", "--auth on"), (' RUN_FLAGS="--threads 4"', "--auth off --threads 4")):
        if make_run_flags(args) != want:
            print("selftest: make run%s gives %r, want %r" % (args, make_run_flags(args), want))
            ok = False
    for pat, act in good:
        r = match(parse_expectation(pat), D(act))
        if r:
            print("selftest: %s should match %s: %s" % (pat, act, r))
            ok = False
    for pat, act in bad:
        if match(parse_expectation(pat), D(act)) is None:
            print("selftest: %s should not match %s" % (pat, act))
            ok = False
    return 0 if ok else 1


def main(argv):
    if len(argv) == 2 and argv[1] == "selftest":
        return selftest()
    if len(argv) == 3 and argv[1] == "flags":
        print(daemon_flags(document(argv[2])))
        return 0
    if len(argv) == 3 and argv[1] == "count":
        print(len(document(argv[2])))
        return 0
    if len(argv) == 5 and argv[1] == "run":
        return run(argv[2], argv[3], argv[4])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
