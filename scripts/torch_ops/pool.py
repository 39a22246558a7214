"""The worker processes of one backend's sweep: each runs scripts/torch_ops/worker.py, takes
one (op, dtype) at a time, and is replaced when it dies (`crash`) or takes too long
(`timeout`), so that a crash costs only the case in flight."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

WORKER = Path(__file__).resolve().parent / "worker.py"
# A worker's start imports torch, the OpInfo database and xhal.torch; the first start also
# builds the C++ extension (about a minute, more with two builds sharing two cores).
START_TIMEOUT = 900


class PoolError(Exception):
    """The backend cannot be swept: a worker could not start."""


class Worker:
    def __init__(self, slot: int, environment: dict, config: dict, log: Path):
        self.slot = slot
        self.log = log
        self.log_file = open(log, "ab")
        # A session of its own, so that a timeout kills the compilers it started as well.
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log_file,
            env=environment, start_new_session=True,
        )
        self.buffer = b""
        self.ready = False
        self.started = time.monotonic()
        self.task: dict | None = None
        self.task_started = 0.0
        self.task_log_offset = 0
        self.at = ""
        self.cpu_only = False

    def send(self, task: dict) -> None:
        self.task = task
        self.task_started = time.monotonic()
        self.task_log_offset = self.log.stat().st_size
        self.at = ""
        self.cpu_only = False
        try:
            self.process.stdin.write((json.dumps(task) + "\n").encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it died after its last answer; reading its output says so, and how


    def messages(self) -> list[dict] | None:
        """The messages that have arrived, or None when the worker closed its output (died)."""
        chunk = os.read(self.process.stdout.fileno(), 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()
        self.process.stdout.close()
        self.log_file.close()

    def stderr_since_task(self) -> str:
        """The last line the worker wrote to stderr during its task (a panic message, an
        assertion), or an empty string."""
        with open(self.log, "rb") as log:
            log.seek(self.task_log_offset)
            lines = [line.strip() for line in log.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""

    def stderr_tail(self, count: int = 15) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        return "\n".join(lines[-count:])


def death(returncode: int) -> str:
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class Pool:
    """`jobs` workers with the backend's environment; `run` hands them the tasks."""

    def __init__(self, jobs: int, environment: dict, config: dict, log_folder: Path, timeout: float):
        self.environment = environment
        self.config = config
        self.log_folder = log_folder
        self.timeout = timeout
        for old in log_folder.glob("worker-*.log"):
            old.unlink()
        self.workers = [self.start(slot) for slot in range(jobs)]
        self.selector = selectors.DefaultSelector()
        for worker in self.workers:
            self.selector.register(worker.process.stdout, selectors.EVENT_READ, worker)
        self.ready_message: dict | None = None

    def start(self, slot: int) -> Worker:
        return Worker(slot, self.environment, self.config, self.log_folder / f"worker-{slot}.log")

    def replace(self, worker: Worker) -> None:
        self.selector.unregister(worker.process.stdout)
        worker.process.stdout.close()
        worker.log_file.close()
        fresh = self.start(worker.slot)
        self.workers[worker.slot] = fresh
        self.selector.register(fresh.process.stdout, selectors.EVENT_READ, fresh)

    def wait_ready(self) -> dict:
        """The first worker's `ready` message: the device and the OpInfo catalogue."""
        while self.ready_message is None:
            self.poll(lambda result: None)
        return self.ready_message

    def poll(self, on_result) -> None:
        """Waits up to a second for messages; hands each result to `on_result`; turns dead
        and overdue workers into `crash` and `timeout` results and replaces them."""
        for key, _ in self.selector.select(timeout=1.0):
            worker = key.data
            messages = worker.messages()
            if messages is None:
                self.died(worker, on_result)
                continue
            for message in messages:
                if message["type"] == "ready":
                    worker.ready = True
                    if self.ready_message is None:
                        self.ready_message = message
                elif message["type"] == "at":
                    worker.at = message["where"]
                    worker.cpu_only = message.get("cpu_only", False)
                elif message["type"] == "result":
                    worker.task = None
                    on_result(message)
        now = time.monotonic()
        for worker in list(self.workers):
            if worker.task is not None and now - worker.task_started > self.timeout:
                worker.kill()
                task, at = worker.task, worker.at
                on_result({**task, "class": "timeout", "seconds": round(now - worker.task_started, 3),
                           "details": {"message": f"no answer within {self.timeout:g} s; last at {at or 'the start'}"}})
                self.replace(worker)
            elif not worker.ready and now - worker.started > START_TIMEOUT:
                worker.kill()
                raise PoolError(f"a worker did not start within {START_TIMEOUT} s; its log, {worker.log}, ends:\n"
                                + worker.stderr_tail())

    def died(self, worker: Worker, on_result) -> None:
        returncode = worker.process.wait()
        if not worker.ready:
            raise PoolError(f"a worker exited ({death(returncode)}) before it was ready; its log, {worker.log}, "
                            "ends:\n" + worker.stderr_tail())
        if worker.task is None:
            raise PoolError(f"a worker exited ({death(returncode)}) between tasks; its log, {worker.log}, ends:\n"
                            + worker.stderr_tail())
        where = f" at {worker.at}" if worker.at else ""
        last = worker.stderr_since_task()
        message = f"the worker died of {death(returncode)}{where}" + (f"; its last words: {last}" if last else "")
        # A death in the CPU's own run is torch's failure, not xhal's (the kernels known to
        # corrupt the heap are not run at all: settings.CPU_UNRELIABLE).
        kind = "cpu-error" if worker.cpu_only else "crash"
        on_result({**worker.task, "class": kind, "seconds": round(time.monotonic() - worker.task_started, 3),
                   "details": {"message": message, "signal": death(returncode)}})
        self.replace(worker)

    def run(self, tasks: list[dict], on_result) -> None:
        pending = list(reversed(tasks))
        while pending or any(worker.task is not None for worker in self.workers):
            for worker in self.workers:
                if worker.ready and worker.task is None and pending:
                    worker.send(pending.pop())
            self.poll(on_result)

    def close(self) -> None:
        for worker in self.workers:
            if worker.process.poll() is None and worker.ready:
                worker.close()
            else:
                worker.kill()
                worker.process.stdout.close()
                worker.log_file.close()
        self.selector.close()
