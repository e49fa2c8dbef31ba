/*
 * app.js: the dashboard's core. Plain JavaScript, no framework, no build step; the daemon serves the
 * files of web/ and uPlot's two dist files (from the npm registry, pinned by package-lock.json),
 * all compiled into the binary. The dashboard is a client of the public API only (docs/API.md):
 * nothing it shows is unavailable to curl. Its pages and the endpoints each reads: docs/DASHBOARD.md.
 *
 * Load order (index.html): uPlot.iife.min.js, app.js (this file: the global DP), jobs.js (the job
 * pages), pages.js (silos, calculators, estimator runs). Each page file registers its routes with
 * DP.route; the router starts on DOMContentLoaded, after every script has run.
 *
 * CONTRACT (the other page files rely on it; keep it stable):
 *
 *   DP.route(pattern, render)
 *       pattern: a hash route, '#/silos' or '#/silos/:id' (":name" matches one non-empty segment,
 *       decoded). render(params, mainEl, query): params {name: string}, mainEl the <main> element
 *       (emptied, focused after rendering; a fresh element per navigation), query an object of the
 *       hash's query string ('#/silos/1?job_id=7' -> {job_id: "7"}). render may be async and may
 *       return (or resolve to) a function, called when the user leaves the page (close an
 *       EventSource, clear a timer). A page that is left while its awaits are pending can tell by
 *       DP.alive(mainEl) === false. The first matching pattern in registration order wins; '#/',
 *       '' and unknown hashes show the silos list. Hashes that do not start with '#/' (the skip
 *       link) are not routes.
 *   DP.go(hash)          navigates (sets location.hash), e.g. DP.go('#/jobs/3').
 *   DP.api(method, path, body) -> Promise<{status, body, headers}>
 *       path is absolute ('/v1/silos?limit=5'); body (optional) is sent as JSON. Sends
 *       'Authorization: Bearer <token>' when a token is set (sessionStorage only). body of the answer
 *       is the parsed JSON, or the text when it is not JSON, or null when empty. Never rejects: a
 *       network failure is {status: 0, body: {error: {code: "network", message, field: null}}}.
 *   DP.token()           the current token or '' (sessionStorage 'dpsilo.token'; never in a URL,
 *                        never logged). EventSource cannot send headers: read a token-protected
 *                        stream with DP.stream.
 *   DP.stream(path, onEvent) -> {close(), done}: follows a server-sent-event stream the way
 *                        EventSource does (each answer read to its end, then asked again after the
 *                        server's `retry` with Last-Event-ID, so only new events come), but with fetch,
 *                        so the bearer token goes in a header. onEvent({id, event, data}) per event
 *                        (data the raw text). It stops at an `end` event, a 204 (the stream is over),
 *                        another status, or close(); done is a Promise of that last status (200
 *                        after `end`, 204, the error status, 0 on a network failure).
 *                        (GET /v1/jobs/{id}/events: docs/TRAINING.md "Events".)
 *   DP.h(tag, attrs, ...children) -> Element
 *       attrs: null or an object; 'class', 'for', 'text' (textContent), 'html' is NOT supported (no
 *       innerHTML anywhere); on* keys with functions become listeners ('onclick'); other values set
 *       as attributes (true -> '', false/null/undefined -> left out). children: nodes, strings,
 *       numbers, arrays (flattened), null/undefined/false (skipped).
 *   DP.chart(container, opts, data) -> uPlot instance
 *       opts: uPlot options (series, axes, scales ...); width defaults to the container's width,
 *       height to 260; opts.title also labels the container (role="img", aria-label). data: uPlot's
 *       columns [[x...], [y1...], ...]. Callers add rows with u.setData(newData). The chart is
 *       resized with the window and destroyed when its container leaves the document. The instance
 *       is also container.dpChart, where a browser test reads what is plotted (u.data).
 *   DP.fmtEps(x)         epsilon for display, rounded UP to 4 significant digits (a privacy loss is
 *                        never under-reported); null/undefined/Infinity -> '∞'. DP.fmtEpsDown(x)
 *                        rounds DOWN (for what remains of a budget, never over-reported).
 *   DP.fmtUp(x, sig), DP.fmtDown(x, sig): the same with sig significant digits (default 4), for
 *                        other figures with a safe side (a calibrated noise multiplier: up).
 *   DP.fmtNum(x, sig)    a plain number to sig (default 4) significant digits, nearest.
 *   DP.fmtTime(iso)      an ISO timestamp as local date and time.
 *   DP.error(el, answer) renders an API error answer ({status, body}) into el (role="alert"):
 *                        status, code, message, field, request id; a 401 adds a hint to set a token.
 *                        Returns the element created.
 *   DP.fieldErrors(form, answer) -> boolean
 *       Clears the form's previous errors; for a 4xx whose body.error.field names a form control
 *       (by name or data-field, exact, else the longest prefix of the field path, e.g. field
 *       'privacy.clip' or 'event.events[0].noise_multiplier' -> data-field="event"), shows the
 *       message beside that control (class "field-error", aria-describedby, aria-invalid) and
 *       returns true; otherwise renders DP.error into the form's [data-form-error] element (created
 *       at the form's end if missing) and returns false.
 *   DP.meter(value, max, label) -> Element: a labelled bar (a <meter> plus the numbers as text).
 *   DP.field(label, control, hint) -> Element: a <label>ed form row (the control gets an id).
 *   DP.pageAll(path, key) -> Promise<{items, answer}>: follows next_after over every page of a list
 *                        ({key: [...], next_after}); answer is the first failing answer, or null.
 *   DP.operation(method, template) -> Promise<boolean>: whether the OpenAPI document
 *                        (/v1/openapi.json, fetched once per page load) has that operation, e.g.
 *                        DP.operation('get', '/v1/silos/{id}/claims').
 *   DP.alive(mainEl)     false once the user has navigated away from the page that got mainEl.
 */
'use strict';

(function () {
    const TOKEN_KEY = 'dpsilo.token';
    const routes = [];
    let leave = null; /* cleanup function of the page shown */
    let seq = 0;      /* navigation counter: a page's mainEl carries its number */

    const DP = {};
    window.DP = DP;

    /* ---- element builder ---------------------------------------------------------------------- */
    DP.h = function (tag, attrs, ...children) {
        const el = document.createElement(tag);
        if (attrs) {
            for (const [k, v] of Object.entries(attrs)) {
                if (v === undefined || v === null || v === false)
                    continue;
                if (k === 'class')
                    el.className = v;
                else if (k === 'for')
                    el.htmlFor = v;
                else if (k === 'text')
                    el.textContent = v;
                else if (k === 'html')
                    throw new Error('DP.h: html is not supported');
                else if (k.startsWith('on') && typeof v === 'function')
                    el.addEventListener(k.slice(2), v);
                else if (k === 'value' && 'value' in el)
                    el.value = v;
                else
                    el.setAttribute(k, v === true ? '' : String(v));
            }
        }
        const add = (c) => {
            if (c === null || c === undefined || c === false)
                return;
            if (Array.isArray(c))
                c.forEach(add);
            else if (c instanceof Node)
                el.appendChild(c);
            else
                el.appendChild(document.createTextNode(String(c)));
        };
        children.forEach(add);
        return el;
    };
    const h = DP.h;

    /* ---- numbers ------------------------------------------------------------------------------ */
    function roundDir(x, sig, dir) {
        if (x === null || x === undefined || !isFinite(x))
            return '∞';
        if (x === 0)
            return '0';
        const mag = Math.floor(Math.log10(Math.abs(x)));
        const dec = Math.max(0, sig - 1 - mag);
        const f = Math.pow(10, sig - 1 - mag);
        let r = (dir > 0 ? Math.ceil(x * f) : Math.floor(x * f)) / f;
        /* x * f may be off by an ulp (0.1 * 1000 = 100.00000000000001): never step past the
         * value's own decimal rounding when that already has the right direction. */
        const near = Number(x.toFixed(Math.min(dec, 20)));
        if ((dir > 0 && near >= x) || (dir < 0 && near <= x))
            r = near;
        if (dec > 20)
            return r.toExponential(sig - 1);
        const t = r.toFixed(dec);
        return t.includes('.') ? t.replace(/0+$/, '').replace(/\.$/, '') : t;
    }
    DP.fmtEps = (x) => roundDir(x, 4, 1);
    DP.fmtEpsDown = (x) => roundDir(x, 4, -1);
    DP.fmtUp = (x, sig) => roundDir(x, sig || 4, 1);
    DP.fmtDown = (x, sig) => roundDir(x, sig || 4, -1);
    DP.fmtNum = function (x, sig) {
        if (x === null || x === undefined)
            return '–';
        if (!isFinite(x))
            return x > 0 ? '∞' : '−∞';
        if (x === 0)
            return '0';
        const a = Math.abs(x);
        if (a >= 1e6 || a < 1e-4)
            return x.toExponential((sig || 4) - 1);
        return String(Number(x.toPrecision(sig || 4)));
    };
    DP.fmtTime = function (iso) {
        if (!iso)
            return '–';
        const d = new Date(iso);
        return isNaN(d) ? String(iso) : d.toLocaleString();
    };

    /* ---- the token ---------------------------------------------------------------------------- */
    DP.token = function () {
        try {
            return sessionStorage.getItem(TOKEN_KEY) || '';
        } catch (e) {
            return '';
        }
    };
    function setToken(t) {
        try {
            if (t)
                sessionStorage.setItem(TOKEN_KEY, t);
            else
                sessionStorage.removeItem(TOKEN_KEY);
        } catch (e) {
            /* storage refused (private mode): the token lasts until the page is reloaded */
        }
    }

    /* ---- the API ------------------------------------------------------------------------------ */
    function headers(json) {
        const hd = {Accept: 'application/json'};
        if (json)
            hd['Content-Type'] = 'application/json';
        const t = DP.token();
        if (t)
            hd.Authorization = 'Bearer ' + t;
        return hd;
    }
    DP.api = async function (method, path, body) {
        const init = {method, headers: headers(body !== undefined), cache: 'no-store'};
        if (body !== undefined)
            init.body = JSON.stringify(body);
        let r;
        try {
            r = await fetch(path, init);
        } catch (e) {
            return {status: 0, headers: null,
                    body: {error: {code: 'network', message: 'the server did not answer (' + e.message + ')',
                                   field: null}}};
        }
        const text = await r.text();
        let parsed = null;
        if (text) {
            try {
                parsed = JSON.parse(text);
            } catch (e) {
                parsed = text;
            }
        }
        return {status: r.status, body: parsed, headers: r.headers};
    };

    DP.pageAll = async function (path, key) {
        const items = [];
        let after = 0;
        const sep = path.includes('?') ? '&' : '?';
        for (;;) {
            const a = await DP.api('GET', path + sep + 'limit=1000' + (after ? '&after=' + after : ''));
            if (a.status !== 200)
                return {items, answer: a};
            items.push(...(a.body[key] || []));
            if (a.body.next_after === null || a.body.next_after === undefined)
                return {items, answer: null};
            after = a.body.next_after;
        }
    };

    let openapi = null;
    DP.operation = async function (method, template) {
        if (!openapi)
            openapi = DP.api('GET', '/v1/openapi.json');
        const a = await openapi;
        return a.status === 200 && !!(a.body.paths && a.body.paths[template] &&
                                      a.body.paths[template][method.toLowerCase()]);
    };

    /* Parses the complete events of buf (text/event-stream); returns the unparsed rest. */
    function sseParse(buf, onEvent, state) {
        let k;
        while ((k = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, k);
            buf = buf.slice(k + 2);
            const ev = {id: null, event: 'message', data: ''};
            const data = [];
            for (const line of block.split('\n')) {
                if (!line || line[0] === ':')
                    continue;
                const c = line.indexOf(':');
                const name = c < 0 ? line : line.slice(0, c);
                const val = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
                if (name === 'data')
                    data.push(val);
                else if (name === 'event')
                    ev.event = val;
                else if (name === 'id')
                    ev.id = val;
                else if (name === 'retry' && /^\d+$/.test(val))
                    state.retry = Number(val);
            }
            if (ev.id !== null)
                state.lastId = ev.id;
            if (data.length) {
                ev.data = data.join('\n');
                if (ev.event === 'end')
                    state.ended = true;
                onEvent(ev);
            }
        }
        return buf;
    }

    DP.stream = function (path, onEvent) {
        const ctl = new AbortController();
        const state = {retry: 1000, lastId: null, ended: false, closed: false};
        const once = async () => {
            const hd = Object.assign(headers(false), {Accept: 'text/event-stream'});
            if (state.lastId !== null)
                hd['Last-Event-ID'] = state.lastId;
            const r = await fetch(path, {headers: hd, cache: 'no-store', signal: ctl.signal});
            if (r.status !== 200 || !r.body)
                return r.status;
            const reader = r.body.getReader();
            const dec = new TextDecoder();
            let buf = '';
            for (;;) {
                const {value, done: end} = await reader.read();
                if (end)
                    break;
                buf = sseParse(buf + dec.decode(value, {stream: true}).replace(/\r\n?/g, '\n'), onEvent, state);
            }
            return 200;
        };
        const done = (async () => {
            let status = 0;
            try {
                for (;;) {
                    status = await once();
                    if (status !== 200 || state.ended || state.closed)
                        return status;
                    await new Promise((res) => setTimeout(res, state.retry));
                    if (state.closed)
                        return status;
                }
            } catch (e) {
                return state.closed ? status : 0;
            }
        })();
        return {close: () => {
            state.closed = true;
            ctl.abort();
        }, done};
    };

    /* ---- errors ------------------------------------------------------------------------------- */
    DP.error = function (el, answer) {
        const e = answer && answer.body && answer.body.error ? answer.body.error : null;
        const status = answer ? answer.status : 0;
        const box = h('div', {class: 'error', role: 'alert'},
            h('strong', null, status ? 'HTTP ' + status : 'No answer'),
            e && e.code ? [' ', h('code', null, e.code)] : null,
            ': ',
            e ? e.message : (typeof answer.body === 'string' ? answer.body : 'unexpected answer'),
            e && e.field ? [' (field ', h('code', null, e.field), ')'] : null,
            e && e.request_id ? h('span', {class: 'note'}, ' request id ' + e.request_id) : null,
            status === 401 ? h('p', null, 'This daemon runs with tokens (--auth on): enter the admin ' +
                                          'token or a silo token in the "Bearer token" field above.') : null);
        if (el)
            el.appendChild(box);
        return box;
    };

    DP.fieldErrors = function (form, answer) {
        form.querySelectorAll('.field-error').forEach((n) => n.remove());
        form.querySelectorAll('[aria-invalid]').forEach((n) => {
            n.removeAttribute('aria-invalid');
            const d = (n.getAttribute('aria-describedby') || '').split(' ').filter((x) => !x.startsWith('fe-'));
            if (d.length)
                n.setAttribute('aria-describedby', d.join(' '));
            else
                n.removeAttribute('aria-describedby');
        });
        let slot = form.querySelector('[data-form-error]');
        if (slot)
            slot.textContent = '';
        if (!answer || (answer.status >= 200 && answer.status < 300))
            return false;
        const e = answer.body && answer.body.error;
        const field = e && typeof e.field === 'string' ? e.field : null;
        let best = null, bestLen = -1;
        if (field) {
            for (const c of form.querySelectorAll('[name], [data-field]')) {
                const keys = [c.getAttribute('data-field'), c.getAttribute('name')].filter(Boolean);
                for (const k of keys) {
                    const hit = k === field ? Infinity :
                        (field.startsWith(k + '.') || field.startsWith(k + '[')) ? k.length : -1;
                    if (hit > bestLen) {
                        best = c;
                        bestLen = hit;
                    }
                }
            }
        }
        if (best) {
            const id = 'fe-' + Math.random().toString(36).slice(2, 10);
            const msg = h('span', {class: 'field-error', id, role: 'alert'}, e.message);
            const anchor = best.closest('.field') || best;
            anchor.appendChild(msg);
            best.setAttribute('aria-invalid', 'true');
            best.setAttribute('aria-describedby',
                              ((best.getAttribute('aria-describedby') || '') + ' ' + id).trim());
            return true;
        }
        if (!slot) {
            slot = h('div', {'data-form-error': ''});
            form.appendChild(slot);
        }
        DP.error(slot, answer);
        return false;
    };

    /* ---- widgets ------------------------------------------------------------------------------ */
    let nField = 0;
    DP.field = function (label, control, hint) {
        if (!control.id)
            control.id = 'f' + (++nField);
        let hintEl = null;
        if (hint) {
            hintEl = h('span', {class: 'hint', id: control.id + '-hint'}, hint);
            control.setAttribute('aria-describedby', hintEl.id);
        }
        return h('div', {class: 'field'}, h('label', {for: control.id}, label), control, hintEl);
    };

    DP.meter = function (value, max, label) {
        const v = Number.isFinite(value) ? value : 0;
        const m = Number.isFinite(max) && max > 0 ? max : 1;
        return h('div', {class: 'meter'},
            h('meter', {min: 0, max: m, value: Math.min(Math.max(v, 0), m), 'aria-label': label}),
            h('span', {class: 'meter-text'}, label));
    };

    /* ---- charts (uPlot) ----------------------------------------------------------------------- */
    const charts = new Set();
    /* y-axis ticks that fit the axis: 12,500 -> 12.5K, so large losses are not cut off at the
     * left edge (uPlot's default axis is sized for about five characters). */
    const compact = new Intl.NumberFormat('en', {notation: 'compact', maximumSignificantDigits: 4});
    const yTicks = (u, splits) => splits.map(v => v == null ? '' :
        Math.abs(v) >= 1e4 ? compact.format(v) : String(+v.toPrecision(6)));
    DP.chart = function (container, opts, data) {
        const o = Object.assign({}, opts);
        const axes = (o.axes || [{}, {}]).slice();
        while (axes.length < 2)
            axes.push({});
        o.axes = axes.map((a, i) => i === 0 ? a : Object.assign({values: yTicks, size: 60}, a));
        o.width = o.width || Math.max(280, container.clientWidth || 600);
        o.height = o.height || 260;
        if (o.title) {
            container.setAttribute('role', 'img');
            container.setAttribute('aria-label', o.title);
        }
        const u = new uPlot(o, data, container);
        container.dpChart = u;
        u._dpFixedWidth = !!opts.width;
        u._dpContainer = container;
        charts.add(u);
        return u;
    };
    function sweepCharts(resize) {
        for (const u of charts) {
            if (!u._dpContainer.isConnected) {
                u.destroy();
                charts.delete(u);
            } else if (resize && !u._dpFixedWidth) {
                const w = Math.max(280, u._dpContainer.clientWidth);
                if (Math.abs(w - u.width) > 2)
                    u.setSize({width: w, height: u.height});
            }
        }
    }
    window.addEventListener('resize', () => sweepCharts(true));

    /* ---- the router --------------------------------------------------------------------------- */
    DP.route = function (pattern, render) {
        const parts = pattern.replace(/^#?\/?/, '').split('/').filter(Boolean);
        routes.push({parts, render});
    };
    DP.go = function (hash) {
        if (location.hash === hash)
            show();
        else
            location.hash = hash;
    };
    DP.alive = (mainEl) => mainEl.isConnected && mainEl.dataset.seq === String(seq);

    function match(hash) {
        const [pathPart, q] = hash.replace(/^#\/?/, '').split('?');
        const segs = pathPart.split('/').filter(Boolean);
        const query = Object.fromEntries(new URLSearchParams(q || ''));
        for (const r of routes) {
            if (r.parts.length !== segs.length)
                continue;
            const params = {};
            let ok = true;
            for (let i = 0; i < segs.length && ok; i++) {
                if (r.parts[i].startsWith(':')) {
                    try {
                        params[r.parts[i].slice(1)] = decodeURIComponent(segs[i]);
                    } catch (e) {
                        ok = false;
                    }
                } else {
                    ok = r.parts[i] === segs[i];
                }
            }
            if (ok)
                return {r, params, query, segs};
        }
        return null;
    }

    async function show() {
        let hash = location.hash;
        if (hash && !hash.startsWith('#/'))
            return; /* an in-page anchor (the skip link), not a route */
        let m = match(hash || '#/');
        if (!m)
            m = match('#/silos');
        if (leave) {
            try {
                leave();
            } catch (e) {
                console.warn('leaving the page failed', e);
            }
            leave = null;
        }
        seq++;
        const old = document.getElementById('main');
        const main = h('main', {id: 'main', tabindex: '-1', 'data-seq': String(seq)});
        old.replaceWith(main);
        sweepCharts(false);
        const section = m ? (m.segs[0] || 'silos') : 'silos';
        for (const a of document.querySelectorAll('[data-nav]')) {
            if (a.dataset.nav === section)
                a.setAttribute('aria-current', 'page');
            else
                a.removeAttribute('aria-current');
        }
        if (!m) {
            main.appendChild(h('p', null, 'No page is registered.'));
            return;
        }
        const mySeq = seq;
        main.setAttribute('aria-busy', 'true');
        try {
            const cleanup = await m.r.render(m.params, main, m.query);
            if (typeof cleanup === 'function') {
                if (mySeq === seq)
                    leave = cleanup;
                else
                    cleanup();
            }
        } catch (e) {
            console.error(e);
            main.appendChild(h('div', {class: 'error', role: 'alert'}, 'This page failed: ' + e.message));
        }
        main.removeAttribute('aria-busy');
        if (mySeq === seq && navigated && !main.contains(document.activeElement))
            main.focus({preventScroll: true});
    }
    let navigated = false;

    /* ---- start -------------------------------------------------------------------------------- */
    function startTokenForm() {
        const form = document.getElementById('token-form');
        const input = document.getElementById('token');
        const note = document.getElementById('token-note');
        const describe = () => {
            note.textContent = DP.token() ? 'a token is set (kept only in this tab\'s session storage)'
                                          : 'no token (fine with --auth off)';
        };
        input.value = DP.token();
        describe();
        form.addEventListener('submit', (ev) => {
            ev.preventDefault();
            setToken(input.value.trim());
            describe();
            show();
        });
        document.getElementById('token-clear').addEventListener('click', () => {
            input.value = '';
            setToken('');
            describe();
            show();
        });
        document.getElementById('skip').addEventListener('click', (ev) => {
            ev.preventDefault();
            document.getElementById('main').focus();
        });
    }

    document.addEventListener('DOMContentLoaded', () => {
        startTokenForm();
        window.addEventListener('hashchange', () => {
            navigated = true;
            show();
        });
        show();
    });
})();
