// run.mjs: drives Debian's chromium with playwright-core through every tests/browser/*.test.mjs
// module, against a running dpsilod (tests/integration/test_dashboard.sh starts it).
//
//   node tests/browser/run.mjs --out DIR [--base URL] [--base-on URL --admin-token-file F]
//                              [--calls FILE] [--only NAME,...]
//
// --base is a daemon with --auth off, --base-on one with --auth on (its admin token in F); either
// may be left out. One browser serves both (starting chromium is the slow part).
// A module exports `default async function (t)` and optionally `export const modes = ['off', 'on']`
// (the --auth settings it runs under; default ['off']). It runs once per mode, each time in a fresh
// browser context (so a fresh session storage), with t = {
//   page            the playwright Page
//   base            the daemon's URL ('http://127.0.0.1:PORT')
//   auth            'on' | 'off'; adminToken (auth on: the admin token, else '')
//   api(method, path, body?, {token}?) -> {status, body}: a call from the test (seeding and the
//                   API's own figures), with the admin token when auth is on and no token is given
//   open(hash)      loads base + '/' + hash and waits until the page has rendered (main not busy)
//   go(hash)        changes the hash of the loaded dashboard (no reload) and waits for the new page
//   navigate(fn)    runs fn (a click, a key press) and waits until the page it leads to has rendered
//   settled()       waits until the page shown has rendered (after an action that does not navigate)
//   login(token?)   sets the token (default: the admin token) in the tab's session storage
//   shot(name)      screenshot of the whole page into OUT/NAME.png, and docs/img/dashboard-NAME.png
//                   when UPDATE_SCREENSHOTS=1
//   allowHttpError(status, pathRegex)  a 4xx the page is expected to get (a form's bad value): not
//                   counted as a failed request, nor its console line as an error
//   check(cond, what) / eq(got, want, what) / atLeastUp(shown, exact, what) / atMostDown(...):
//                   assertions; a failed one fails the module and the run (the module goes on, to
//                   report them all). a11y(what): every visible form control is labelled and every
//                   chart has a text alternative.
//   log(...)        a line in the output
// }
//
// Whatever the module does, the run fails on: a console error or an uncaught exception on any page,
// a request that failed (network) or answered >= 400 unless allowed, and any request the page made
// to the API that the OpenAPI document does not describe (operation, query parameter names, status).
// Every request of the pages and of t.api is also appended to --calls in lib.sh's format, so that
// lib.sh's finish checks each answer's body against the document's schema (openapi_check.py).
import {chromium} from 'playwright-core';
import {readFileSync, readdirSync, mkdirSync, appendFileSync, writeFileSync, copyFileSync, existsSync} from 'node:fs';
import {dirname, join, resolve} from 'node:path';
import {fileURLToPath, pathToFileURL} from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..', '..');
const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith('--'))
        acc.push([a.slice(2), all[i + 1]]);
    return acc;
}, []));
const bases = {off: args.base, on: args['base-on']};
const out = args.out;
const only = args.only ? args.only.split(',') : null;
if ((!bases.off && !bases.on) || !out) {
    console.error('usage: run.mjs --out DIR [--base URL] [--base-on URL --admin-token-file F] [--calls FILE] [--only A,B]');
    process.exit(2);
}
mkdirSync(out, {recursive: true});
const onToken = args['admin-token-file'] && existsSync(args['admin-token-file'])
    ? readFileSync(args['admin-token-file'], 'utf8').split('\n')[0].trim() : '';
const doc = JSON.parse(readFileSync(join(ROOT, 'openapi', 'openapi.json'), 'utf8'));
const callsFile = args.calls || null;
let nCall = 0;

// ---- the OpenAPI document: operations, their query parameters and statuses -----------------------
const ops = [];
for (const [tpl, item] of Object.entries(doc.paths)) {
    const rx = new RegExp('^' + tpl.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '$');
    for (const [m, op] of Object.entries(item)) {
        if (!['get', 'post', 'put', 'patch', 'delete', 'head'].includes(m))
            continue;
        const params = [...(item.parameters || []), ...(op.parameters || [])].map(p => {
            if (p.$ref) {
                const name = p.$ref.split('/').pop();
                return doc.components.parameters[name];
            }
            return p;
        });
        ops.push({tpl, rx, method: m.toUpperCase(), query: new Set(params.filter(p => p.in === 'query').map(p => p.name)),
                  statuses: new Set(Object.keys(op.responses || {}))});
    }
}
function isStatic(path) {
    return path === '/' || /^\/[A-Za-z0-9._-]+\.(html|css|js|svg|png|ico|txt)$/.test(path);
}
// Problems of one request against the document ([] when it fits).
function docProblems(method, url, status) {
    const u = new URL(url);
    if (isStatic(u.pathname))
        return status === 200 || status === 304 ? [] : [`${method} ${u.pathname} -> ${status}`];
    const m = method === 'HEAD' ? 'GET' : method;
    const cands = ops.filter(o => o.rx.test(u.pathname));
    if (!cands.length)
        return [`${method} ${u.pathname}: not a path of the OpenAPI document`];
    const op = cands.find(o => o.method === m);
    if (!op)
        return [`${method} ${u.pathname}: the document has no ${method} operation on ${cands[0].tpl}`];
    const p = [];
    for (const k of u.searchParams.keys())
        if (!op.query.has(k))
            p.push(`${method} ${op.tpl}: query parameter ${k} is not documented`);
    if (!op.statuses.has(String(status)) && !op.statuses.has('default'))
        p.push(`${method} ${op.tpl}: status ${status} is not documented`);
    return p;
}
// One line of lib.sh's calls file: METHOD PATH STATUS ANSWER_FILE SENT_FILE CTYPE (query left out:
// openapi_check.py matches paths, and skips any with a '%').
function record(method, url, status, answerText, sentText, ctype) {
    if (!callsFile)
        return;
    const u = new URL(url);
    if (isStatic(u.pathname))
        return;
    const dir = join(dirname(callsFile), 'browser');
    mkdirSync(dir, {recursive: true});
    const n = ++nCall;
    const a = join(dir, `answer.${process.pid}.${n}`);
    writeFileSync(a, answerText || '');
    let s = '-';
    if (sentText !== null && sentText !== undefined) {
        s = join(dir, `sent.${process.pid}.${n}`);
        writeFileSync(s, sentText);
    }
    appendFileSync(callsFile, [method, u.pathname, status, a, s, s === '-' ? '-' : (ctype || 'application/json')].join('\t') + '\n');
}

// ---- one module ------------------------------------------------------------------------------------
async function runModule(browser, name, fn, auth) {
    const base = bases[auth];
    const adminToken = auth === 'on' ? onToken : '';
    const failures = [];
    const fail = (what) => {
        failures.push(what);
        console.log(`  FAIL: ${name}: ${what}`);
    };
    const context = await browser.newContext({viewport: {width: 1280, height: 800}});
    const page = await context.newPage();
    const allowed = [];
    const isAllowed = (status, url) => allowed.some(a => a.status === status && a.rx.test(new URL(url).pathname));
    let nPageRequests = 0;
    page.on('console', msg => {
        if (msg.type() !== 'error')
            return;
        const text = msg.text();
        // Chromium logs every >= 400 answer of fetch() as "Failed to load resource"; the answer
        // itself is judged below (allowed or a failure), so the line is not counted twice.
        if (/^Failed to load resource: the server responded with a status of \d+/.test(text))
            return;
        fail(`console error: ${text}`);
    });
    page.on('pageerror', e => fail(`uncaught exception: ${e.message}`));
    page.on('requestfailed', req => {
        const err = req.failure() ? req.failure().errorText : '?';
        // A stream the page closes itself (leaving a live job's page) is aborted on purpose.
        if (err === 'net::ERR_ABORTED' && /\/events(\?|$)/.test(new URL(req.url()).pathname + '?'))
            return;
        fail(`request failed: ${req.method()} ${req.url()}: ${err}`);
    });
    page.on('response', async resp => {
        const req = resp.request();
        const url = resp.url();
        if (!url.startsWith(base))
            return fail(`request outside the daemon: ${url}`);
        nPageRequests++;
        const status = resp.status();
        if (status >= 400 && !isAllowed(status, url))
            fail(`${req.method()} ${url} -> ${status}`);
        for (const p of docProblems(req.method(), url, status))
            fail(`page request does not fit the OpenAPI document: ${p}`);
        const ctype = (resp.headers()['content-type'] || '');
        let text = '';
        if (ctype.startsWith('application/json')) {
            try {
                text = await resp.text();
            } catch (e) {
                text = '';
            }
        }
        record(req.method(), url, status, text, req.postData(), req.headers()['content-type']);
    });

    const t = {
        page, base, auth, adminToken, out,
        log: (...a) => console.log('   ', ...a),
        check(cond, what) {
            if (!cond)
                fail(what);
            return !!cond;
        },
        eq(got, want, what) {
            return t.check(got === want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
        },
        // A figure shown rounded up (DP.fmtEps) against the API's exact one: never below it, and
        // above it by less than one unit of its 4th significant digit.
        atLeastUp(shown, exact, what) {
            const v = parseFloat(String(shown).replace(/[^0-9.eE+-]/g, ''));
            const ulp = exact === 0 ? 0 : Math.pow(10, Math.floor(Math.log10(Math.abs(exact))) - 3);
            return t.check(Number.isFinite(v) && v >= exact && v - exact <= ulp * 1.0000001,
                           `${what}: shown ${JSON.stringify(shown)}, API ${exact} (want rounded up)`);
        },
        atMostDown(shown, exact, what) {
            const v = parseFloat(String(shown).replace(/[^0-9.eE+-]/g, ''));
            const ulp = exact === 0 ? 0 : Math.pow(10, Math.floor(Math.log10(Math.abs(exact))) - 3);
            return t.check(Number.isFinite(v) && v <= exact && exact - v <= ulp * 1.0000001,
                           `${what}: shown ${JSON.stringify(shown)}, API ${exact} (want rounded down)`);
        },
        // Every visible form control of the page has a label (a <label for>, an enclosing label,
        // aria-label or aria-labelledby) and every chart a text alternative.
        async a11y(what) {
            const bad = await page.evaluate(() => {
                const out = [];
                for (const el of document.querySelectorAll('input, select, textarea')) {
                    if (el.type === 'hidden' || !el.getClientRects().length)
                        continue;
                    const named = (el.labels && el.labels.length) || el.getAttribute('aria-label') ||
                                  el.getAttribute('aria-labelledby');
                    if (!named)
                        out.push(`${el.tagName.toLowerCase()}[name=${el.name || '?'}] has no label`);
                }
                for (const c of document.querySelectorAll('.uplot')) {
                    const box = c.parentElement;
                    if (!box || box.getAttribute('role') !== 'img' || !box.getAttribute('aria-label'))
                        out.push('a chart has no text alternative');
                }
                return out;
            });
            for (const b of bad)
                fail(`${what}: ${b}`);
        },
        allowHttpError(status, rx) {
            allowed.push({status, rx});
        },
        async api(method, path, body, opt) {
            const token = opt && opt.token !== undefined ? opt.token : adminToken;
            const headers = {Accept: 'application/json'};
            if (token)
                headers.Authorization = 'Bearer ' + token;
            const init = {method, headers};
            if (body !== undefined) {
                headers['Content-Type'] = 'application/json';
                init.body = typeof body === 'string' ? body : JSON.stringify(body);
            }
            const r = await fetch(base + path, init);
            const text = await r.text();
            record(method, base + path, r.status, text, init.body === undefined ? null : init.body);
            let parsed = null;
            try {
                parsed = text ? JSON.parse(text) : null;
            } catch (e) {
                parsed = text;
            }
            return {status: r.status, body: parsed};
        },
        // A fresh load of the dashboard at hash (through about:blank: a goto that changes only the
        // hash would not reload), resolved once the router has rendered the page.
        async open(hash) {
            await page.goto('about:blank');
            await page.goto(base + '/' + (hash || ''));
            await t.settled();
        },
        // Goes to another page of the loaded dashboard (a hash change, no reload) and waits for it.
        async go(hash) {
            await t.navigate(() => page.evaluate((hh) => {
                location.hash = hh;
            }, hash));
        },
        // Resolves once the page shown has finished rendering (main not aria-busy).
        async settled() {
            await page.waitForFunction(() => {
                const m = document.getElementById('main');
                return m && m.dataset.seq && !m.hasAttribute('aria-busy');
            }, null, {timeout: 10000});
        },
        // Runs action (a click, a key press) and resolves once the router has rendered the page it
        // led to (a new main, not busy), so that what is read next is the new page.
        async navigate(action) {
            const before = await page.evaluate(() => document.getElementById('main').dataset.seq);
            await action();
            await page.waitForFunction((b) => {
                const m = document.getElementById('main');
                return m && m.dataset.seq !== b && !m.hasAttribute('aria-busy');
            }, before, {timeout: 10000});
        },
        // Puts a token into the tab's session storage, as the token field does (the shell module
        // tests the field itself), without loading a page that would need it first.
        async login(token) {
            await page.goto(base + '/style.css');
            await page.evaluate((tk) => sessionStorage.setItem('dpsilo.token', tk), token === undefined ? adminToken : token);
        },
        async shot(shotName) {
            const file = join(out, `${shotName}.png`);
            await page.screenshot({path: file, fullPage: true});
            if (process.env.UPDATE_SCREENSHOTS === '1') {
                mkdirSync(join(ROOT, 'docs', 'img'), {recursive: true});
                copyFileSync(file, join(ROOT, 'docs', 'img', `dashboard-${shotName}.png`));
            }
        },
    };
    const t0 = Date.now();
    try {
        await fn(t);
    } catch (e) {
        fail(`threw: ${e.stack || e}`);
        try {
            await page.screenshot({path: join(out, `${name}-failure.png`), fullPage: true});
        } catch (e2) {
            /* the page is gone */
        }
    }
    await context.close();
    if (!nPageRequests)
        fail('the module loaded no page');
    console.log(`  ${failures.length ? 'FAIL' : 'ok:  '} browser ${name} (${auth}) (${Date.now() - t0} ms)`);
    return failures.length;
}

// ---- main ------------------------------------------------------------------------------------------
const files = readdirSync(HERE).filter(f => f.endsWith('.test.mjs')).sort();
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const tLaunch = Date.now();
const browser = await chromium.launch({executablePath, headless: true, args: ['--disable-gpu', '--no-first-run']});
console.log(`    chromium started in ${Date.now() - tLaunch} ms`);
let failed = 0, ran = 0;
try {
    for (const auth of ['off', 'on']) {
        if (!bases[auth])
            continue;
        for (const f of files) {
            const name = f.replace(/\.test\.mjs$/, '');
            if (only && !only.includes(name))
                continue;
            const mod = await import(pathToFileURL(join(HERE, f)).href);
            if (!(mod.modes || ['off']).includes(auth))
                continue;
            ran++;
            failed += (await runModule(browser, name, mod.default, auth)) ? 1 : 0;
        }
    }
} finally {
    await browser.close();
}
console.log(`browser: ${ran - failed} of ${ran} module runs passed`);
process.exit(failed || !ran ? 1 : 0);
