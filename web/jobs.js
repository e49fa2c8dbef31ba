/*
 * jobs.js: the job pages (the jobs list, a job's live page, the launch form). Registers its routes
 * with DP.route (contract at the top of app.js): '#/jobs', '#/jobs/:id', '#/launch'.
 */
'use strict';
