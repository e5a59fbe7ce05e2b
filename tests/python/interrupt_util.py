"""Ctrl-C in the middle of a long call, judged so that a loaded machine does
not fail it and a call that ignores the signal always does."""
import os
import signal
import threading
import time


def ctrl_c_stops(fn, stopped_early=None, before=None, tries=3):
    """Sends SIGINT to this process a tenth of the way into fn() (timed by one
    earlier call) and returns (ok, description). `before()`, if given, runs
    before each interrupted call's timer starts (to mark its output).

    Judged against when the signal was actually sent: a timer thread can start
    late, and on a loaded machine the caller can wait a time slice or a GIL
    switch interval before it next asks. When the signal came in the first
    half of the call, the call must raise KeyboardInterrupt, and either
    `stopped_early()` finds direct evidence in its output that it stopped (for
    example, the last piece never written) or, without one, it ended in the
    first 75 % of the time it had left when the signal came. A call that
    ignores the signal ends at its full time and fails either way. When the
    timer ran late (the second half), the call is tried again, up to `tries`
    times; if the signal never came in time the result is a failure.
    """
    fn()  # the output's pages and the inputs touched once
    t0 = time.perf_counter()
    fn()
    full = time.perf_counter() - t0
    notes = []
    for _ in range(tries):
        sent = []

        def interrupt():
            sent.append(time.perf_counter() - t0)
            os.kill(os.getpid(), signal.SIGINT)

        timer = threading.Timer(0.1 * full, interrupt)
        inside = False
        if before is not None:
            before()
        t0 = time.perf_counter()
        try:
            timer.start()
            fn()
            took = time.perf_counter() - t0
            try:  # the signal came after the call: let it land here
                timer.join()
                time.sleep(0.5)
            except KeyboardInterrupt:
                pass
        except KeyboardInterrupt:
            took = time.perf_counter() - t0
            inside = True
        timer.join()
        at = sent[0] if sent else float("inf")
        note = "%.4f s of %.4f s, signal at %.4f s, raised: %s" % (took, full, at, inside)
        if at < 0.5 * full:
            if stopped_early is not None:
                return inside and stopped_early(), note
            return inside and took - at < 0.75 * (full - at), note
        if not (inside or took < at):  # late, yet the call ran past it
            return False, note
        notes.append(note)
    return False, "the signal never came in the first half: " + "; ".join(notes)
