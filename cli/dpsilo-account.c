/*
 * dpsilo-account: the accounting calculators of dpsilod without a server (issue #3).
 *
 * It builds the same JSON request the HTTP API takes and calls the same route handlers
 * (service/api/accounting.c) in-process, so the CLI and the daemon give identical answers.
 * Exit status: 0 success, 2 bad usage or bad input (HTTP 400), 3 impossible target (HTTP 422),
 * 1 anything else. See --help.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <jansson.h>

#include "service/api/routes.h"
#include "service/base/version.h"

static const char HELP[] =
    "NAME\n"
    "    dpsilo-account - privacy accounting calculators (RDP, zCDP, PLD) without a server\n"
    "\n"
    "SYNOPSIS\n"
    "    dpsilo-account epsilon   [EVENT] --delta D [OPTIONS]\n"
    "    dpsilo-account delta     [EVENT] --epsilon E [OPTIONS]\n"
    "    dpsilo-account rdp       [EVENT] [--orders A,B,...] [--delta D] [OPTIONS]\n"
    "    dpsilo-account calibrate [EVENT] --target-epsilon E --delta D [OPTIONS]\n"
    "    dpsilo-account --help | --version\n"
    "\n"
    "DESCRIPTION\n"
    "    Computes the privacy of an event (an event tree, docs/ACCOUNTING.md) exactly as POST\n"
    "    /v1/accounting/{epsilon,delta,rdp,calibrate} of dpsilod does: same code, same numbers.\n"
    "    By default it prints the one number asked for (full precision, %.17g); --json prints\n"
    "    the full answer (accountant, conversion, optimal order, orders, neighbouring relation).\n"
    "\n"
    "EVENT (either --event or the DP-SGD shorthand)\n"
    "    --event JSON             any event tree, e.g. "
    "'{\"type\":\"gaussian\",\"noise_multiplier\":2}'\n"
    "    --noise-multiplier S     noise std / sensitivity of each step (omit or '?' to solve for "
    "it\n"
    "                             with calibrate)\n"
    "    --sampling-rate Q        Poisson sampling rate of each step, in (0, 1] (omit: no "
    "sampling;\n"
    "                             '?' solves for it with calibrate)\n"
    "    --steps T                number of steps (default 1; '?' solves for it with calibrate)\n"
    "    --mechanism gaussian|laplace   the per-step mechanism (default gaussian)\n"
    "    The shorthand builds self_composed(T, poisson_sampled(Q, MECHANISM(S))).\n"
    "\n"
    "OPTIONS\n"
    "    --delta D                target delta in (0, 1)\n"
    "    --epsilon E              epsilon for the delta command\n"
    "    --target-epsilon E       budget for calibrate\n"
    "    --accountant rdp|zcdp|pld   (default rdp); pld prints the upper end of its bracket,\n"
    "                             --json also gives epsilon_lower (docs/ACCOUNTING.md, PLD)\n"
    "    --conversion NAME        rdp: optimal (default: Balle et al. 2020 bound at the best "
    "order\n"
    "                             of a continuous search), balle2020, mironov2017;\n"
    "                             zcdp: cks2020 (default), bun_steinke2016\n"
    "    --orders A,B,...         RDP orders (default: 1.1..10.9 by 0.1, 11..64, 80..4096)\n"
    "    --neighboring add_remove|replace_one   (default add_remove)\n"
    "    --json                   print the full JSON answer (errors too)\n"
    "    --help                   this text\n"
    "    --version                the version of dpsilo-account and of its libraries\n"
    "\n"
    "EXAMPLES\n"
    "    dpsilo-account epsilon --sampling-rate 0.01 --noise-multiplier 1.1 --steps 10000 \\\n"
    "        --delta 1e-5\n"
    "    dpsilo-account calibrate --sampling-rate 0.01 --steps 10000 --delta 1e-5 \\\n"
    "        --target-epsilon 1 --json\n"
    "    dpsilo-account delta --event '{\"type\":\"zcdp\",\"rho\":0.5}' --epsilon 3 --accountant "
    "zcdp\n"
    "\n"
    "EXIT STATUS\n"
    "    0 success; 2 bad usage or invalid input; 3 impossible target (no noise can meet it);\n"
    "    1 other failure.\n"
    "\n"
    "SEE ALSO\n"
    "    docs/ACCOUNTING.md (mechanisms, conversions, neighbouring relations, papers).\n";

static int usage(const char *msg)
{
    fprintf(stderr, "dpsilo-account: %s (see --help)\n", msg);
    return 2;
}

static int parse_num(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return (errno != 0 || end == s || *end != '\0') ? -1 : 0;
}

/* Sets body[key] = number parsed from val, or null for "?". */
static int put_num(json_t *o, const char *key, const char *val, const char *flag)
{
    if (strcmp(val, "?") == 0)
        return json_object_set_new(o, key, json_null());
    double v;
    if (parse_num(val, &v) != 0) {
        fprintf(stderr, "dpsilo-account: %s expects a number, got \"%s\"\n", flag, val);
        return -1;
    }
    return json_object_set_new(o, key, json_real(v));
}

int main(int argc, char **argv)
{
    gsl_set_error_handler_off();
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        char line[256];
        version_line("dpsilo-account", line, sizeof line);
        puts(line);
        return 0;
    }
    const char *cmd = argv[1];
    route_fn fn;
    if (strcmp(cmd, "epsilon") == 0)
        fn = route_accounting_epsilon;
    else if (strcmp(cmd, "delta") == 0)
        fn = route_accounting_delta;
    else if (strcmp(cmd, "rdp") == 0)
        fn = route_accounting_rdp;
    else if (strcmp(cmd, "calibrate") == 0)
        fn = route_accounting_calibrate;
    else
        return usage("unknown command; expected epsilon, delta, rdp or calibrate");

    json_t *body = json_object();
    const char *event = NULL, *noise = NULL, *rate = NULL, *steps = NULL, *mech = "gaussian";
    int as_json = 0, rc = 0;
    for (int i = 2; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0) {
            fputs(HELP, stdout);
            json_decref(body);
            return 0;
        }
        if (strcmp(a, "--json") == 0) {
            as_json = 1;
            continue;
        }
        if (i + 1 >= argc) {
            json_decref(body);
            return usage("missing value after an option");
        }
        const char *v = argv[++i];
        if (strcmp(a, "--event") == 0)
            event = v;
        else if (strcmp(a, "--noise-multiplier") == 0)
            noise = v;
        else if (strcmp(a, "--sampling-rate") == 0)
            rate = v;
        else if (strcmp(a, "--steps") == 0)
            steps = v;
        else if (strcmp(a, "--mechanism") == 0)
            mech = v;
        else if (strcmp(a, "--delta") == 0)
            rc = put_num(body, "delta", v, a);
        else if (strcmp(a, "--epsilon") == 0)
            rc = put_num(body, "epsilon", v, a);
        else if (strcmp(a, "--target-epsilon") == 0)
            rc = put_num(body, "target_epsilon", v, a);
        else if (strcmp(a, "--accountant") == 0)
            rc = json_object_set_new(body, "accountant", json_string(v));
        else if (strcmp(a, "--conversion") == 0)
            rc = json_object_set_new(body, "conversion", json_string(v));
        else if (strcmp(a, "--neighboring") == 0)
            rc = json_object_set_new(body, "neighboring", json_string(v));
        else if (strcmp(a, "--orders") == 0) {
            json_t *arr = json_array();
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t && rc == 0;
                 t = strtok_r(NULL, ",", &save)) {
                double x;
                if (parse_num(t, &x) != 0) {
                    fprintf(stderr, "dpsilo-account: --orders: \"%s\" is not a number\n", t);
                    rc = -1;
                } else {
                    json_array_append_new(arr, json_real(x));
                }
            }
            free(copy);
            json_object_set_new(body, "orders", arr);
        } else {
            fprintf(stderr, "dpsilo-account: unknown option %s (see --help)\n", a);
            rc = -1;
        }
    }
    if (rc != 0) {
        json_decref(body);
        return 2;
    }
    json_t *ev = NULL;
    if (event != NULL) {
        if (noise || rate || steps) {
            json_decref(body);
            return usage("--event cannot be combined with the shorthand options");
        }
        json_error_t je;
        ev = json_loads(event, 0, &je);
        if (ev == NULL) {
            fprintf(stderr, "dpsilo-account: --event is not valid JSON: %s\n", je.text);
            json_decref(body);
            return 2;
        }
    } else {
        if (noise == NULL && strcmp(cmd, "calibrate") != 0) {
            json_decref(body);
            return usage("give --event or --noise-multiplier");
        }
        json_t *m = json_pack("{s:s}", "type", mech);
        rc |= put_num(m, "noise_multiplier", noise ? noise : "?", "--noise-multiplier");
        ev = m;
        if (rate != NULL) {
            json_t *p = json_pack("{s:s, s:o}", "type", "poisson_sampled", "event", ev);
            rc |= put_num(p, "sampling_rate", rate, "--sampling-rate");
            ev = p;
        }
        json_t *s = json_pack("{s:s, s:o}", "type", "self_composed", "event", ev);
        if (steps != NULL && strcmp(steps, "?") == 0) {
            json_object_set_new(s, "count", json_null());
        } else {
            char *end;
            errno = 0;
            long long t = steps ? strtoll(steps, &end, 10) : 1;
            if (steps && (errno || end == steps || *end != '\0')) {
                fprintf(stderr, "dpsilo-account: --steps expects an integer, got \"%s\"\n", steps);
                rc = -1;
            }
            json_object_set_new(s, "count", json_integer(t));
        }
        ev = s;
        if (rc != 0) {
            json_decref(ev);
            json_decref(body);
            return 2;
        }
    }
    json_object_set_new(body, "event", ev);

    http_req rq;
    memset(&rq, 0, sizeof rq);
    rq.method = "POST";
    rq.path = cmd;
    rq.body = body;
    static const app no_app; /* no database, ledger or pool: the calculators need none */
    rq.app = &no_app;
    http_resp rs;
    memset(&rs, 0, sizeof rs);
    dp_err err;
    dp_err_clear(&err);
    int status = fn(&rq, &rs, &err);
    int exit_code = 0;
    if (status != DP_OK) {
        exit_code = err.code == DP_EINVAL ? 2 : err.code == DP_ENUMERIC ? 3 : 1;
        if (as_json) {
            json_t *e =
                json_pack("{s:{s:s, s:s, s:s}}", "error", "code", dp_err_code_name(err.code),
                          "message", err.msg, "field", err.field);
            char *txt = e ? json_dumps(e, JSON_COMPACT) : NULL;
            if (txt)
                puts(txt);
            free(txt);
            json_decref(e);
        } else {
            fprintf(stderr, "dpsilo-account: %s%s%s\n", err.field, err.field[0] ? ": " : "",
                    err.msg);
        }
    } else if (as_json) {
        char *txt = json_dumps(rs.body, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        if (txt)
            puts(txt);
        free(txt);
    } else {
        const char *key = strcmp(cmd, "delta") == 0 ? "delta" : "epsilon";
        if (strcmp(cmd, "calibrate") == 0) {
            key = json_object_get(rs.body, "noise_multiplier") ? "noise_multiplier"
                  : json_object_get(rs.body, "sampling_rate")  ? "sampling_rate"
                                                               : "count";
        }
        if (strcmp(cmd, "rdp") == 0 && json_object_get(rs.body, "epsilon") == NULL) {
            json_t *o = json_object_get(rs.body, "orders"), *r = json_object_get(rs.body, "rdp");
            for (size_t i = 0; i < json_array_size(o); i++) {
                json_t *ri = json_array_get(r, i);
                if (json_is_null(ri))
                    printf("%.17g inf\n", json_number_value(json_array_get(o, i)));
                else
                    printf("%.17g %.17g\n", json_number_value(json_array_get(o, i)),
                           json_number_value(ri));
            }
        } else {
            json_t *v = json_object_get(rs.body, key);
            if (json_is_integer(v))
                printf("%lld\n", (long long)json_integer_value(v));
            else if (json_is_number(v))
                printf("%.17g\n", json_number_value(v));
            else
                printf("inf\n");
        }
    }
    http_resp_clear(&rs);
    json_decref(body);
    return exit_code;
}
