"""The job server over real HTTP (uvicorn in a subprocess, httpx), with the SubprocessJobRunner and a fake entry."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from jobserver_testlib import TOKEN, Server, suite, wait_state, wait_until

PROTECTED = [
    ("POST", "/add_job"),
    ("GET", "/jobs"),
    ("GET", "/jobs/abc"),
    ("POST", "/jobs/abc/cancel"),
    ("GET", "/jobs/abc/logs"),
]


def test_health_needs_no_token(server: Server) -> None:
    r = httpx.get(server.url + "/health")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["queue_ticks"] >= 0


@pytest.mark.parametrize("method,path", PROTECTED)
def test_401_without_or_with_wrong_token(server: Server, method: str, path: str) -> None:
    body = {"suite": suite("ok-auth")} if method == "POST" else None
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ):
        r = httpx.request(method, server.url + path, headers=headers, json=body)
        assert r.status_code == 401, (headers, r.text)
        assert r.headers["www-authenticate"] == "Bearer"
    with server.client() as c:
        assert all(j["name"] != "ok-auth" for j in c.get("/jobs").json()["jobs"])


def test_401_precedes_body_validation(server: Server) -> None:
    r = httpx.post(server.url + "/add_job", json={"name": "../x", "suite": {"bogus": 1}})
    assert r.status_code == 401


def test_422_invalid_suite(server: Server) -> None:
    with server.client() as c:
        r = c.post("/add_job", json={"suite": {**suite("ok-bad"), "modelz": []}})
        assert r.status_code == 422
        assert r.json()["detail"].startswith("suite.modelz: unknown key")
        bad_model = suite("ok-bad")
        bad_model["models"][0]["replicaz"] = 2
        assert "suite.models[0].replicaz: unknown key" in c.post("/add_job", json={"suite": bad_model}).json()["detail"]
        r = c.post("/add_job", json={"suite_yaml": "name: ok-bad\nmodels: [\n"})
        assert r.status_code == 422 and "invalid YAML" in r.json()["detail"]
        r = c.post("/add_job", json={"suite_yaml": "name: ok-bad\nmodels: []\nbenchmarks: [{name: mmlu_tiny}]\n"})
        assert r.status_code == 422 and r.json()["detail"].startswith("suite_yaml.models:")
        unknown = {**suite("ok-bad"), "benchmarks": [{"name": "mmlu_tiyn"}]}
        r = c.post("/add_job", json={"suite": unknown})
        assert r.status_code == 422 and "Did you mean: mmlu_tiny" in r.json()["detail"]
        r = c.post("/add_job", json={"suite": suite("ok-bad"), "suite_yaml": "x: 1"})
        assert r.status_code == 422 and "exactly one of" in r.json()["detail"]
        assert c.post("/add_job", json={"name": "x"}).status_code == 422
        assert all(j["name"] != "ok-bad" for j in c.get("/jobs").json()["jobs"])


@pytest.mark.parametrize("name", ["../x", "/etc", "a/b", "..", ".hidden", "a\\b", "x\x00y", "", "a" * 65, "a b"])
def test_422_path_traversal_and_bad_names(server: Server, name: str) -> None:
    with server.client() as c:
        r = c.post("/add_job", json={"name": name, "suite": suite("ok-name")})
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith("name:")
        r = c.post("/add_job", json={"suite": suite(name)})  # the suite name is checked too
        assert r.status_code == 422


def test_add_list_get_succeeded(server: Server) -> None:
    with server.client() as c:
        r = c.post("/add_job", json={"name": "first", "suite": suite("ok-1")})
        assert r.status_code == 201
        first = r.json()
        assert first["state"] in ("pending", "submitted", "running") and len(first["id"]) == 32
        second = c.post(
            "/add_job",
            json={
                "suite_yaml": "name: ok-2\nmodels: [{name: m, engine: openai, source: "
                "{kind: endpoint, base_url: 'http://127.0.0.1:9/v1'}}]\n"
                "benchmarks: [{name: mmlu_tiny}]\n"
            },
        ).json()
        done = wait_state(c, first["id"], {"succeeded", "failed"})
        assert done["state"] == "succeeded", done
        assert done["name"] == "first" and done["ray_job_id"] == f"local-{first['id']}"
        assert done["suite"]["pool"]["routing"] == "p2c"  # stored with defaults filled in: reproducible record
        assert wait_state(c, second["id"], {"succeeded", "failed"})["state"] == "succeeded"

        ids = [j["id"] for j in c.get("/jobs").json()["jobs"]]
        assert ids.index(second["id"]) < ids.index(first["id"])  # newest first
        listed = c.get("/jobs", params={"state": "succeeded"}).json()["jobs"]
        assert {first["id"], second["id"]} <= {j["id"] for j in listed}
        assert all(j["state"] == "succeeded" and "suite" not in j for j in listed)
        assert c.get("/jobs", params={"state": "nonsense"}).status_code == 422
        assert c.get("/jobs", params={"limit": 1}).json()["jobs"][0]["id"] == ids[0]

        logs = c.get(f"/jobs/{first['id']}/logs").json()
        assert "fake run of ok-1" in logs["logs"]
        result = server.tmp / "jobs" / first["id"] / "runs" / "result.json"
        assert result.read_text() == '{"suite": "ok-1"}'
        assert (server.tmp / "jobs" / first["id"] / "suite.yaml").read_text().startswith("name: ok-1")
        assert c.get("/jobs/nope").status_code == 404
        assert c.get("/jobs/nope/logs").status_code == 404
        assert c.post("/jobs/nope/cancel").status_code == 404


def test_failed_job_and_cancel_of_finished_is_409(server: Server) -> None:
    with server.client() as c:
        job = c.post("/add_job", json={"suite": suite("fail-1")}).json()
        done = wait_state(c, job["id"], {"succeeded", "failed"})
        assert done["state"] == "failed" and done["message"] == "exit code 3"
        assert "failing on purpose" in c.get(f"/jobs/{job['id']}/logs").json()["logs"]
        r = c.post(f"/jobs/{job['id']}/cancel")
        assert r.status_code == 409 and "already failed" in r.json()["detail"]


def test_cancel_running_job_and_bounded_concurrency(server: Server) -> None:
    with server.client() as c:
        sleeper = c.post("/add_job", json={"suite": suite("sleep-1")}).json()
        running = wait_state(c, sleeper["id"], {"running"})
        queued = c.post("/add_job", json={"suite": suite("ok-queued")}).json()
        # max_concurrent=1: the second job waits while the first runs, however many scheduler passes go by
        ticks = c.get("/health").json()["queue_ticks"]
        wait_until(lambda: c.get("/health").json()["queue_ticks"] >= ticks + 3, 30, "three scheduler passes")
        assert c.get(f"/jobs/{queued['id']}").json()["state"] == "pending"
        pending = c.post("/add_job", json={"suite": suite("ok-never")}).json()
        r = c.post(f"/jobs/{pending['id']}/cancel")  # a pending job is cancelled without ever running
        assert r.status_code == 200 and r.json()["state"] == "cancelled"

        pid = int((server.tmp / "jobs" / sleeper["id"] / "pid").read_text())
        r = c.post(f"/jobs/{sleeper['id']}/cancel")
        assert r.status_code == 200 and r.json()["state"] == "cancelled", r.text
        assert running["ray_job_id"] == r.json()["ray_job_id"]
        wait_until(lambda: not _alive(pid), 10, "the cancelled job's process to exit")
        again = c.post(f"/jobs/{sleeper['id']}/cancel")  # idempotent
        assert again.status_code == 200 and again.json()["state"] == "cancelled"

        assert wait_state(c, queued["id"], {"succeeded", "failed"})["state"] == "succeeded"
        assert c.get(f"/jobs/{pending['id']}").json()["state"] == "cancelled"
        assert c.get(f"/jobs/{pending['id']}").json()["ray_job_id"] is None
        assert c.get(f"/jobs/{sleeper['id']}").json()["state"] == "cancelled"  # never overwritten by a poll


def _alive(pid: int) -> bool:
    try:
        return os.getsid(pid) == pid
    except OSError:
        return False


def test_paper_arguments_shape(server: Server) -> None:
    args = {
        "inference_engine": "huggingface",
        "model_name_or_path": "Qwen/Qwen2.5-Omni-3B",
        "exp_name": "qwen2.5-omni-3b",
        "evaluation_engine": "builtin",
        "benchmarks": "mmlu_tiny,asdiv_tiny",
    }
    with server.client() as c:
        r = c.post("/add_job", json={"arguments": args})
        assert r.status_code == 201, r.text
        job = c.get(f"/jobs/{r.json()['id']}").json()
        assert job["name"] == "qwen2.5-omni-3b"
        model = job["suite"]["models"][0]
        assert model["engine"] == "transformers" and model["source"] == {
            "kind": "hf",
            "repo_id": "Qwen/Qwen2.5-Omni-3B",
            "filename": None,
            "revision": None,
        }
        assert [b["name"] for b in job["suite"]["benchmarks"]] == ["mmlu_tiny", "asdiv_tiny"]
        r = c.post("/add_job", json={"arguments": {**args, "benchmarks": "librispeech_test_clean"}})
        assert r.status_code == 422 and "unknown benchmark 'librispeech_test_clean'" in r.json()["detail"]
        r = c.post("/add_job", json={"arguments": {**args, "exp_name": "../../etc"}})
        assert r.status_code == 422 and r.json()["detail"].startswith("arguments.exp_name:")
        r = c.post("/add_job", json={"arguments": {**args, "temperature": 0.7}})
        assert r.status_code == 422 and "arguments.temperature: unknown key" in r.json()["detail"]
        r = c.post("/add_job", json={"arguments": suite("ok-args")})  # a full suite under "arguments" also works
        assert r.status_code == 201
        wait_state(c, r.json()["id"], {"succeeded"})


def test_openapi_lists_typed_endpoints(server: Server) -> None:
    spec = httpx.get(server.url + "/openapi.json").json()
    paths = spec["paths"]
    assert {"/add_job", "/jobs", "/jobs/{job_id}", "/jobs/{job_id}/cancel", "/jobs/{job_id}/logs", "/health"} <= set(
        paths
    )
    add = paths["/add_job"]["post"]
    assert add["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/AddJobRequest")
    assert add["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/AddJobResponse")
    assert add["security"] == [{"HTTPBearer": []}] and "security" not in paths["/health"]["get"]
    schemas = spec["components"]["schemas"]
    assert {"SuiteConfig", "JobDetail", "JobList", "ErrorResponse"} <= set(schemas)
    assert schemas["AddJobRequest"]["properties"]["name"]["anyOf"][0]["pattern"]
    assert "409" in paths["/jobs/{job_id}/cancel"]["post"]["responses"]


def test_persistence_across_restart(make_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = make_server().start()
    with first.client() as c:
        done = c.post("/add_job", json={"suite": suite("ok-before")}).json()
        wait_state(c, done["id"], {"succeeded"})
        slow = c.post("/add_job", json={"suite": suite("slow-restart", seed=60)}).json()  # runs 6 s
        wait_state(c, slow["id"], {"running"})
        queued = c.post("/add_job", json={"suite": suite("ok-queued")}).json()
    first.stop()  # the running job outlives the server

    pid = int((tmp_path / "jobs" / slow["id"] / "pid").read_text())
    assert _alive(pid)
    second = make_server().start()
    with second.client() as c:
        ids = {j["id"]: j["state"] for j in c.get("/jobs").json()["jobs"]}
        assert ids[done["id"]] == "succeeded" and ids[queued["id"]] in ("pending", "submitted", "running", "succeeded")
        reattached = wait_state(c, slow["id"], {"succeeded", "failed"})
        assert reattached["state"] == "succeeded" and reattached["message"] == "exit code 0"
        assert wait_state(c, queued["id"], {"succeeded", "failed"})["state"] == "succeeded"
        assert (tmp_path / "jobs" / slow["id"] / "runs" / "result.json").exists()


def test_refuses_to_start_without_token(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from omnieval.jobserver import cli_main

    monkeypatch.delenv("OMNIEVAL_SERVER_TOKEN", raising=False)
    assert cli_main(["--runner", "subprocess"]) == 2
    assert "OMNIEVAL_SERVER_TOKEN is not set" in capsys.readouterr().err
    monkeypatch.setenv("MY_TOKEN", "short")
    assert cli_main(["--token-env", "MY_TOKEN"]) == 2
    assert "MY_TOKEN is shorter than 16" in capsys.readouterr().err
