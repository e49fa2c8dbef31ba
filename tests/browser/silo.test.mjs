// A silo's page: its figures, the chart of what it spent over time (the points are the API's
// cumulative totals, charge by charge), the audit log page by page with the API's cursor, filtered by
// job and by time (the same answers the API gives for the same query), a bad filter's 400 beside its
// field, and its open claims (the reserved figure and GET /v1/silos/{id}/claims).

const ev = (sigma) => ({type: 'gaussian', noise_multiplier: sigma});

export default async function (t) {
    const {page} = t;
    const mk = await t.api('POST', '/v1/silos', {name: 'hospital-d', budget: {epsilon: 4, delta: 1e-6}});
    t.eq(mk.status, 201, 'silo created');
    const id = mk.body.id;
    const jobs = [11, 12, 11, 13, 11];
    for (let k = 0; k < jobs.length; k++) {
        const a = await t.api('POST', `/v1/silos/${id}/charges`, {event: ev(6 + k), job_id: jobs[k], reason: 'round ' + k});
        t.eq(a.status, 201, `charge ${k}`);
    }
    t.eq((await t.api('POST', `/v1/silos/${id}/claims`, {event: ev(12), timeout_ms: 600000, job_id: 11})).status, 201, 'claim');
    const silo = (await t.api('GET', `/v1/silos/${id}`)).body;
    const log = (await t.api('GET', `/v1/silos/${id}/charges?limit=1000`)).body.charges;

    await t.open(`#/silos/${id}?limit=2`);
    t.eq((await page.textContent('h1 [data-name]')).trim(), silo.name, 'the name');
    t.atLeastUp((await page.textContent('[data-figure="spent"] .meter-text')).split(' of ')[0], silo.spent.epsilon, 'spent');
    t.atMostDown((await page.textContent('[data-figure="remaining"] .meter-text')).split(' of ')[0],
                 silo.remaining.epsilon, 'remaining');

    // The chart: x = the charges' times (after the silo's creation), y = the API's running totals.
    const plotted = await page.$eval('#spend-chart', (el) => el.dpChart.data.map((col) => Array.from(col)));
    t.eq(plotted[1].length, log.length + 1, 'one point per charge, plus the start');
    t.eq(plotted[1][0], 0, 'the curve starts at 0');
    for (let k = 0; k < log.length; k++) {
        t.eq(plotted[1][k + 1], log[k].cumulative_after.epsilon, `point ${k + 1} is the total after charge ${log[k].id}`);
        t.eq(plotted[0][k + 1], Date.parse(log[k].time) / 1000, `point ${k + 1} is at its charge's time`);
    }
    t.check(plotted[2].every((v) => v === silo.budget.epsilon), 'the budget line');
    t.eq(await page.getAttribute('#spend-chart', 'role'), 'img', 'the chart has a text alternative');
    await t.shot('silo');

    // The log, page by page: the rows are the API's pages for the same cursor.
    const rows = async () => page.$$eval('table.charges tbody tr', (trs) => trs.map((tr) => ({
        id: Number(tr.dataset.charge), cost: tr.querySelector('[data-cost]').textContent,
        after: tr.querySelector('[data-after]').textContent})));
    let after = 0, pages = 0;
    for (;;) {
        const want = (await t.api('GET', `/v1/silos/${id}/charges?limit=2${after ? '&after=' + after : ''}`)).body;
        const got = await rows();
        t.eq(got.map((r) => r.id).join(','), want.charges.map((c) => c.id).join(','), `page ${pages + 1} of the log`);
        for (let k = 0; k < Math.min(got.length, want.charges.length); k++) {
            t.atLeastUp(got[k].cost, want.charges[k].cost.epsilon, `charge ${got[k].id}: cost`);
            t.atLeastUp(got[k].after, want.charges[k].cumulative_after.epsilon, `charge ${got[k].id}: total after`);
        }
        pages++;
        if (want.next_after === null) {
            t.eq(await page.$('a[rel="next"]'), null, 'no "Next page" on the last page');
            break;
        }
        // Keyboard: focus the link and press Enter.
        await page.focus('a[rel="next"]');
        await t.navigate(() => page.keyboard.press('Enter'));
        after = want.next_after;
        if (pages > 10)
            break;
    }
    t.eq(pages, Math.ceil(log.length / 2), 'as many pages as the API gives');

    // Filter by job, through the form.
    await t.go(`#/silos/${id}`);
    await page.fill('input[name="job_id"]', '11');
    await t.navigate(() => page.click('#charge-filter button[type="submit"]'));
    const byJob = (await t.api('GET', `/v1/silos/${id}/charges?job_id=11`)).body.charges;
    t.check(byJob.length === 3, 'job 11 has 3 charges');
    t.eq((await rows()).map((r) => r.id).join(','), byJob.map((c) => c.id).join(','), 'the rows of job 11');

    // Filter by time: since the 4th charge's second (the form has second precision), as the page
    // sends it, against the API's answer to the same query.
    await page.fill('input[name="job_id"]', '');
    const local = await page.evaluate((iso) => {
        const d = new Date(iso);
        const p = (n) => String(n).padStart(2, '0');
        return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
    }, log[3].time);
    await page.fill('input[name="since"]', local);
    await t.navigate(() => page.click('#charge-filter button[type="submit"]'));
    const since = new URLSearchParams(page.url().split('?')[1]).get('since');
    t.check(since && Date.parse(since) <= Date.parse(log[3].time), `the page sent since=${since}`);
    const bySince = (await t.api('GET', `/v1/silos/${id}/charges?since=${encodeURIComponent(since)}`)).body.charges;
    t.check(bySince.some((c) => c.id === log[3].id), 'the 4th charge is at or after since');
    t.eq((await rows()).map((r) => r.id).join(','), bySince.map((c) => c.id).join(','), 'the rows since that time');
    const until = new Date(Date.parse(log[0].time) - 60000).toISOString();
    await t.go(`#/silos/${id}?until=${encodeURIComponent(until)}`);
    t.eq((await rows()).length, 0, 'nothing before the first charge');
    t.check(await page.isVisible('text=No charges match.'), '"No charges match." is said');

    // A bad filter: the API's 400 is shown beside the field it names.
    t.allowHttpError(400, new RegExp(`^/v1/silos/${id}/charges$`));
    await t.go(`#/silos/${id}?job_id=0`);
    const fe = await page.textContent('#charge-filter .field-error');
    const api400 = await t.api('GET', `/v1/silos/${id}/charges?job_id=0`);
    t.eq(api400.body.error.field, 'job_id', 'the API names job_id');
    t.eq(fe, api400.body.error.message, 'the message is beside the job id field');
    t.eq(await page.getAttribute('input[name="job_id"]', 'aria-invalid'), 'true', 'the field is marked invalid');

    // Open claims: the reserved figure and the list (GET /v1/silos/{id}/claims).
    const reserved = await page.textContent('[data-reserved]');
    t.check(reserved.startsWith(`${silo.reserved.active_claims} open claim`), `the number of open claims (${reserved})`);
    t.atLeastUp(reserved.split('ε ')[1], silo.reserved.epsilon, 'the reserved figure');
    const cl = (await t.api('GET', `/v1/silos/${id}/claims`)).body.claims.filter((c) => !c.state || c.state === 'active');
    t.check(cl.length > 0, 'the silo has an open claim to show');
    const shown = await page.$$eval('table.claims tbody tr', (trs) => trs.map((tr) => Number(tr.dataset.claim)));
    t.eq(shown.join(','), cl.map((c) => c.id).join(','), 'the open claims listed');

    // An unknown silo: the API's 404, said.
    t.allowHttpError(404, /^\/v1\/silos\/999999$/);
    await t.go('#/silos/999999');
    t.check((await page.textContent('.error')).includes('silo 999999 does not exist'), 'an unknown silo is said');
}
