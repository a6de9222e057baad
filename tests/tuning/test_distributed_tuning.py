"""Distributed tuning with keras-tuner's chief/worker protocol on
127.0.0.1: one chief and two workers as separate processes; a worker killed
in the middle of a trial and restarted under its ID finishes that trial.
Slow (about a minute and a half: keras-tuner's chief polls its workers
every 20 s before it exits): `make test-slow`."""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = pathlib.Path(__file__).parent
MAX_TRIALS = 4
TIMEOUT = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tuner_id, folder, port):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "PYTHONPATH": str(HERE.parent.parent),
           "KERASTUNER_TUNER_ID": tuner_id, "KERASTUNER_ORACLE_IP": "127.0.0.1",
           "KERASTUNER_ORACLE_PORT": str(port)}
    log = open(folder / f"{tuner_id}.out", "w")
    return subprocess.Popen([sys.executable, str(HERE / "distributed_search.py"), str(folder), str(MAX_TRIALS)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)


def started(folder):
    path = folder / "started.log"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(condition, deadline, what):
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.slow
def test_chief_and_two_workers_lose_no_trial_when_a_worker_is_killed(tmp_path):
    deadline = time.monotonic() + TIMEOUT
    port = free_port()
    processes = {"chief": start("chief", tmp_path, port)}
    try:
        time.sleep(2)  # the chief's server first
        processes["tuner0"] = start("tuner0", tmp_path, port)
        processes["tuner1"] = start("tuner1", tmp_path, port)
        wait_for(lambda: any(t == "tuner1" for t, _ in started(tmp_path)), deadline, "tuner1's first trial")
        killed_trial = [trial for tuner, trial in started(tmp_path) if tuner == "tuner1"][-1]
        processes["tuner1"].send_signal(signal.SIGKILL)
        processes["tuner1"].wait()
        processes["tuner1"] = start("tuner1", tmp_path, port)
        for name, process in processes.items():
            process.wait(timeout=max(deadline - time.monotonic(), 1))
            output = (tmp_path / f"{name}.out").read_text()
            assert process.returncode == 0, f"{name}: {output[-2000:]}"
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
    trials = [json.loads(p.read_text()) for p in sorted((tmp_path / "search").glob("trial_*/trial.json"))]
    assert len(trials) == MAX_TRIALS
    assert {t["status"] for t in trials} == {"COMPLETED"}
    assert len({t["trial_id"] for t in trials}) == MAX_TRIALS
    runs = started(tmp_path)
    # The killed trial ran again on the restarted tuner1; every other trial once.
    assert runs.count(["tuner1", killed_trial]) == 2
    assert sorted({trial for _, trial in runs}) == sorted(t["trial_id"] for t in trials)
    assert len(runs) == MAX_TRIALS + 1
    assert {tuner for tuner, _ in runs} == {"tuner0", "tuner1"}
