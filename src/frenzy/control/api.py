"""The HTTP API (FastAPI). Every 4xx says what to change; nothing is queued on a bad request."""

from __future__ import annotations

import re
from typing import Optional

import anyio.to_thread

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from frenzy.control import artifacts as arts
from frenzy.control import auth as au
from frenzy.control import request as r
from frenzy.control import schemas as s
from frenzy.control.data_gate import DataCheckGate, TooManyDataChecks
from frenzy.control.limits import DEFAULT_MAX_BODY_BYTES, BodyLimit
from frenzy.control.metrics import build_registry
from frenzy.control.records import AttemptRecord, JobRecord
from frenzy.control.request import JobRequest
from frenzy.control.service import ControlService
from frenzy.control.store import UnknownJobError
from frenzy.control.team_routes import register_team_routes
from frenzy.core.errors import InvalidConfigError, NoFeasiblePlanError, UnknownNameError
from frenzy.core.one_at_a_time import ProfilerBusy

# Job ids are "j-" and hex: an id the store's 32-character column could hold is looked up (a 404 when
# unknown), while a NUL, a control character or a longer string never reaches the database; nor does
# a sequence number beyond its 64-bit integers (bounded on the parsed number: "9_999" parses too).
JOB_ID = re.compile(r"[A-Za-z0-9_.-]{1,32}")
MAX_SEQUENCE = 2**63 - 1
MAX_STATE_CHARS = 32  # the longest state name is 9: an error never repeats more than this of a query
SHOWN_ERROR_CHARS = 200  # how much of a body parser's own error an answer repeats
ERRORS = {404: {"model": s.ErrorOut}, 409: {"model": s.ErrorOut}, 422: {"model": s.ErrorOut}}
AUTH = {401: {"model": s.ErrorOut, "description": "no token, or not a valid one"},
        422: {"model": s.ErrorOut}}  # an authenticated route parses its Authorization header
BUSY = {429: {"model": s.ErrorOut, "description": "too many submissions are reading their data, or models of "
                                                  "families without a formula being profiled; retry"}}
RETRY_AFTER_S = 5


def create_app(service: ControlService, *, auth: au.AuthSettings | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, data_checks: DataCheckGate | None = None) -> FastAPI:
    """`auth`: who must authenticate (frenzy.control.auth); default: a loopback server's rules.
    `data_checks`: how many submissions read their data at once (frenzy.control.data_gate)."""
    data_checks = data_checks or DataCheckGate()
    user, metrics_user = au.fastapi_dependencies(service.store, auth or au.AuthSettings())
    User = Depends(user)

    def own_job(job_id: str, who: au.Principal) -> JobRecord:
        return au.visible_job(service.store.get_job(job_id), who)

    # The schema and its pages are served below, behind the same authentication as the API: they name
    # every route and field, which a server exposed beyond loopback shows only to its users.
    app = FastAPI(title="Frenzy", version="0.1.0", dependencies=[Depends(_bounded_keys)],
                  docs_url=None, redoc_url=None, openapi_url=None,
                  description="Serverless LLM training: submit a model and training settings, never a GPU count. "
                              "Frenzy predicts memory (MARP), plans, places and runs the job on Ray.")
    registry, _ = build_registry(service)
    _schema_routes(app, User)
    _errors(app)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)

    @app.post("/v1/jobs", status_code=201, response_model=s.JobCreated, responses={**ERRORS, **AUTH, **BUSY},
              tags=["jobs"])
    async def submit(job: s.JobIn, who: au.Principal = User) -> s.JobCreated:
        """Validate, read the data, plan against the live cluster, and queue. 422 for bad settings or data,
        409 if nothing fits, 429 when too many submissions are reading their data or being profiled."""
        request, data = await data_checks.run(service.check_data, JobRequest.from_json(job.to_domain_json()))
        record, choices = await anyio.to_thread.run_sync(service.queue, request, data, who.user)
        return s.JobCreated(id=record.id, state=record.state.value, plans=[_plan_json(c) for c in choices])

    @app.get("/v1/jobs", response_model=list[s.JobSummary], responses=AUTH, tags=["jobs"])
    def list_jobs(state: Optional[str] = Query(None, max_length=MAX_STATE_CHARS, description="only jobs in this state"),
                  limit: int = Query(500, ge=1, le=10_000), who: au.Principal = User) -> list[s.JobSummary]:
        """Your jobs (an admin's: everyone's)."""
        from frenzy.control.states import parse_state
        states = [parse_state(state)] if state else None
        return [_summary(j) for j in service.store.list_jobs(states, limit=limit, owner=who.owner_filter())]

    @app.get("/v1/jobs/{job_id}", response_model=s.JobDetail, responses={**ERRORS, **AUTH}, tags=["jobs"])
    def get_job(job_id: str, who: au.Principal = User) -> s.JobDetail:
        """State, chosen plan with MARP's breakdown, placement, attempts (predicted vs observed), progress."""
        job = own_job(job_id, who)
        factor = None
        if job.chosen:
            factor = service.store.calibration().get((job.chosen.get("family", ""), job.gpu_type), (1.0, 0))[0]
        return s.JobDetail(**_summary(job).model_dump(), request=job.request, chosen_plan=job.chosen,
                           placement=list(job.allocation), plans=list(job.plans),
                           attempts_detail=[_attempt(a) for a in service.store.attempts(job_id)],
                           progress=job.progress, failure_reason=job.failure_reason, calibration_factor=factor,
                           timings={"submitted_at": job.submitted_at, "placed_at": job.placed_at,
                                    "started_at": job.started_at, "finished_at": job.finished_at,
                                    "submit_to_placed_s": (job.placed_at - job.submitted_at) if job.placed_at
                                    else None})

    @app.get("/v1/jobs/{job_id}/logs", response_model=s.LogsOut, responses={**ERRORS, **AUTH}, tags=["jobs"])
    def logs(job_id: str, after: int = Query(0, ge=0, le=MAX_SEQUENCE,
                                             description="only lines after this sequence number"),
             who: au.Principal = User):
        job = own_job(job_id, who)
        rows = service.store.logs(job_id, after=after)
        return s.LogsOut(job_id=job_id, lines=[s.LogLine(seq=q, ts=t, line=ln) for q, t, ln in rows],
                         next_after=rows[-1][0] if rows else after, finished=job.state.is_terminal)

    @app.get("/v1/jobs/{job_id}/artifacts", response_model=s.ArtifactsOut, responses={**ERRORS, **AUTH},
             tags=["jobs"])
    def artifacts(job_id: str, who: au.Principal = User) -> s.ArtifactsOut:
        """What the job hands back: a peft adapter or a save_pretrained model, tokenizer files, frenzy_job.json."""
        job = own_job(job_id, who)
        root = service.artifact_root(job_id)
        files = [s.ArtifactFile(path=p, bytes=n) for p, n in arts.list_files(root)]
        return s.ArtifactsOut(job_id=job_id, state=job.state.value, ready=arts.is_ready(root), files=files,
                              total_bytes=sum(f.bytes for f in files))

    @app.get("/v1/jobs/{job_id}/artifacts/{path:path}", response_class=FileResponse,
             responses={**ERRORS, **AUTH}, tags=["jobs"])
    def artifact(job_id: str, path: str, request: Request, who: au.Principal = User) -> FileResponse:
        """One artifact file, streamed (whole, or the byte ranges of a Range header). Only files inside
        the job's artifact folder are served."""
        own_job(job_id, who)
        target = arts.resolve(service.artifact_root(job_id), path)
        wanted = request.headers.get("range")
        if wanted is not None and request.headers.get("if-range") is None:  # with If-Range, a stale Range
            arts.check_range(wanted, target.stat().st_size)                   # is ignored, not refused
        return FileResponse(target, media_type="application/octet-stream", filename=target.name)

    @app.delete("/v1/jobs/{job_id}", response_model=s.JobSummary, responses={**ERRORS, **AUTH}, tags=["jobs"])
    def cancel(job_id: str, who: au.Principal = User) -> s.JobSummary:
        """Cancel: the loop stops its workers within a step. A finished job is returned unchanged."""
        own_job(job_id, who)
        return _summary(service.cancel(job_id))

    @app.get("/v1/cluster", response_model=s.ClusterOut, responses=AUTH, dependencies=[User], tags=["cluster"])
    def cluster() -> s.ClusterOut:
        view = service.cluster()
        return s.ClusterOut(nodes=[s.NodeOut(**n) for n in view.nodes], gpu_types=view.by_type, teams=view.teams)

    @app.get("/v1/plans", response_model=s.PlansOut, responses={**ERRORS, **AUTH, **BUSY}, dependencies=[User],
             tags=["plans"])
    def plans(model: str = Query(min_length=1, max_length=r.MAX_PATH_CHARS, pattern=s.PRINTABLE,
                                 description="as in POST /v1/jobs"),
              global_batch: int = Query(8, ge=1, le=r.MAX_GLOBAL_BATCH),
              seq_len: int = Query(512, ge=1, le=r.MAX_SEQ_LEN), steps: int = Query(10, ge=1, le=r.MAX_STEPS),
              precision: str = Query("bf16-mixed", max_length=32), method: str = Query("full", max_length=32),
              optimizer: str = Query("adamw", max_length=32), objective: str = Query("time", max_length=32),
              max_gpus: Optional[int] = Query(None, ge=1, le=r.MAX_GPUS),
              gpu_types: Optional[str] = Query(None, max_length=1024, pattern=s.PRINTABLE,
                                               description="comma list of allowed GPU types")) -> s.PlansOut:
        """Dry run: the ranked plans this spec would get on the live cluster. Nothing is queued."""
        request = JobRequest.from_json(dict(
            model=model, global_batch=global_batch, seq_len=seq_len, steps=steps, precision=precision,
            method=method, optimizer=optimizer, objective=objective,
            limits={"max_gpus": max_gpus, "gpu_types": [g for g in (gpu_types or "").split(",") if g]}))
        spec, choices = service.plan(request)
        return s.PlansOut(model=spec.model.name, params=spec.model.num_params,
                          model_source=spec.model.model_source, plans=[_plan_json(c) for c in choices])

    # The metrics are text, the refusals JSON like every other error: the 200 is declared text/plain
    # by hand so that the error responses keep the application/json FastAPI gives them.
    @app.get("/metrics", responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                                          "description": "Prometheus exposition format"},
                                    **AUTH, 403: {"model": s.ErrorOut}},
             dependencies=[Depends(metrics_user)], tags=["ops"])
    def metrics():
        return PlainTextResponse(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict:  # on the event loop: answers even when every worker thread is busy
        return {"ok": True, "loop_step_errors": service.step_errors}

    register_team_routes(app, service, user)
    _declare_errors(app)
    return app


def _bounded_keys(request: Request) -> None:
    """Every route's job id fits the store's column (else a 422), checked once for all routes."""
    job_id = request.path_params.get("job_id")
    if job_id is not None and not JOB_ID.fullmatch(job_id):
        raise RequestValidationError([{"type": "value_error", "loc": ("path", "job_id"), "msg": (
            "a job id is 1 to 32 letters, digits, '_', '.' or '-' (e.g. j-0123456789)")}])


def _declare_errors(app: FastAPI) -> None:
    """The OpenAPI document says what every route answers on a bad request: ErrorOut, the one 4xx
    shape (413 where a body is read, 422 where anything is parsed), never FastAPI's default list."""
    for route in app.routes:
        if not isinstance(route, APIRoute):
            continue
        route.responses = dict(route.responses)  # routes share ERRORS: declare per route
        # A schema reference, not {"model": ...}: a route turns models into fields when it is built.
        # ErrorOut is in the document's components through ERRORS.
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
        if route.body_field is not None:
            route.responses.setdefault(400, {"description": "the body cannot be parsed (not UTF-8 JSON)",
                                             "content": error})
            route.responses.setdefault(413, {"description": "request body too large", "content": error})
        if route.body_field is not None or route.dependant.query_params or route.dependant.path_params:
            route.responses.setdefault(422, {"description": "what to change", "content": error})


def _error(status: int, detail: str, errors: list[dict] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content=s.ErrorOut(
        detail=detail, errors=errors if errors is not None else [{"loc": [], "msg": detail}]).model_dump())


def _schema_routes(app: FastAPI, user) -> None:
    from fastapi.openapi.docs import get_swagger_ui_html

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(_who: au.Principal = user) -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def docs(_who: au.Principal = user):
        return get_swagger_ui_html(openapi_url="/openapi.json", title="Frenzy API")


def _errors(app: FastAPI) -> None:
    def reply(status):
        return lambda _req, exc: _error(status, str(exc))

    app.add_exception_handler(UnknownJobError, reply(404))
    app.add_exception_handler(arts.UnknownArtifactError, reply(404))
    app.add_exception_handler(UnknownNameError, reply(422))
    app.add_exception_handler(InvalidConfigError, reply(422))
    app.add_exception_handler(ValueError, reply(422))
    app.add_exception_handler(NoFeasiblePlanError, reply(409))

    @app.exception_handler(arts.RangeError)
    async def bad_range(_req: Request, exc: arts.RangeError):
        response = _error(exc.status, str(exc))
        if exc.status == 416:
            response.headers["Content-Range"] = f"bytes */{exc.size}"
        return response

    async def busy(_req: Request, exc: Exception):
        response = _error(429, str(exc))
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response

    app.add_exception_handler(TooManyDataChecks, busy)
    app.add_exception_handler(ProfilerBusy, busy)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_req: Request, exc: StarletteHTTPException):
        detail = str(exc.detail)
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):  # FastAPI's "error parsing the body"
            cause = str(exc.__cause__).split("; use sys.")[0][:SHOWN_ERROR_CHARS]  # not Python's advice to itself
            detail = f"the body could not be read as JSON ({cause}); send one JSON object in UTF-8"
        response = _error(exc.status_code, detail)
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid(_req: Request, exc: RequestValidationError):
        parts, items = [], []
        for err in exc.errors():
            loc = [p if isinstance(p, int) else str(p) for p in err.get("loc", ()) if p != "body"]
            where = ".".join(str(p) for p in loc)
            if err.get("type") == "json_invalid":  # its loc is a character offset, not a field
                error = (err.get("ctx") or {}).get("error", "")
                msg = f"the body is not valid JSON ({error} at character {where or 0}); send one JSON object"
                loc = []
            elif err.get("type") == "extra_forbidden":
                hint = " (GPU counts are chosen by Frenzy)" if "gpu" in where.lower() else ""
                msg = f"unknown field '{where}'{hint}; remove it"
            else:
                msg = f"{where}: {err.get('msg')}" if where else str(err.get("msg"))
            parts.append(msg)
            items.append({"loc": loc, "msg": msg})
        return _error(422, "; ".join(parts), items)


def _plan_json(choice) -> dict:
    return {**choice.to_json(), "describe": choice.plan.describe(), "gpu_memory_bytes": choice.gpu.memory_bytes}


def _summary(job: JobRecord) -> s.JobSummary:
    p = job.progress
    return s.JobSummary(id=job.id, name=job.name, state=job.state.value, priority=job.priority,
                        gpu_type=job.gpu_type, num_gpus=job.chosen["num_gpus"] if job.chosen else None,
                        plan=job.chosen.get("describe") if job.chosen else None, attempts=job.attempts,
                        step=p.get("step"), total_steps=p.get("total_steps"), loss=p.get("loss"),
                        eval_loss=p.get("eval_loss"),
                        at_risk=job.at_risk, submitted_at=job.submitted_at, owner=job.owner)


def _attempt(a: AttemptRecord) -> s.AttemptOut:
    peak = max(a.observed_peak_bytes) if a.observed_peak_bytes else None
    return s.AttemptOut(number=a.number, outcome=a.outcome.value, gpu_type=a.gpu_type,
                        plan=a.choice.get("describe", ""), allocation=list(a.allocation),
                        predicted_device_bytes=a.predicted_device_bytes,
                        observed_peak_bytes=list(a.observed_peak_bytes), observed_source=a.observed_source,
                        predicted_comparable_bytes=a.predicted_comparable_bytes,
                        observed_over_predicted=round(peak / a.predicted_comparable_bytes, 4)
                        if peak and a.predicted_comparable_bytes else None,
                        started_at=a.started_at, ended_at=a.ended_at, error=a.error)
