-- wrk script: POST a small JSON body to /v1/echo (bench/http/run.sh).
wrk.method = "POST"
wrk.body = '{"message": "hello from wrk", "count": 2}'
wrk.headers["Content-Type"] = "application/json"
