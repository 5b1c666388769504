"""The report of benchmarks/profile_service.py (testkit/profile_report.py): each thread's CPU
seconds split among the stages as that thread's own samples are, and a thread with CPU time and
no sample named as a row of its own (py-spy's raw output as it writes it with ``--threads``)."""

from __future__ import annotations

from testkit.profile_report import NOT_SAMPLED, report_of, stages_by_thread

RAW = "\n".join(
    [
        # the pipeline's thread: 3 samples reading conventions, 1 assembling
        "thread (101): loopwatch-pipeline;_run (loopwatch/service/pipeline.py:1);"
        "read_span (loopwatch/conventions/read.py:2) 3",
        "thread (101): loopwatch-pipeline;add (loopwatch/core/assembler.py:3) 1",
        # a request thread: every sample building span views
        "thread (102): loopwatch-grpc_0;span_views (loopwatch/service/otlp.py:4) 5",
    ]
)


def test_each_thread_is_split_by_its_own_samples() -> None:
    sampled = stages_by_thread(RAW)
    assert sampled[101][0] == "loopwatch-pipeline"
    assert dict(sampled[101][1]) == {"read conventions": 3, "assemble (buffer spans per trace)": 1}
    spent = {101: ("python", 2.0), 102: ("python", 1.0), 103: ("event_engine", 1.0)}
    report, _ = report_of(RAW, spent)
    assert report["process_cpu_seconds"] == 4.0
    # 2 CPU-s of the pipeline split 3:1, the request thread's 1 CPU-s to the views, even though
    # the request thread has more samples
    assert report["share_of_cpu"] == {
        "read conventions": 0.375,
        "decode + span views": 0.25,
        f"{NOT_SAMPLED}: event_engine": 0.25,
        "assemble (buffer spans per trace)": 0.125,
    }
    assert [t["name"] for t in report["threads"]] == [
        "loopwatch-pipeline",
        "loopwatch-grpc_0",
        "event_engine",
    ]
