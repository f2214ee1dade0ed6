"""One rank of a test pool (conftest.Pool).

Opens a communicator from the environment (as a launched training process
does), says hello, then runs the scenarios its test names on stdin, one JSON
line each, answering one JSON line each on the real stdout: the result, or
the exception's class, its base classes, message and traceback.  Anything the
scenarios print goes to stderr, the pool's log.
"""

import json
import os
import sys
import traceback

# Keep fd 1 for the replies; print() and libring's messages go to stderr.
_replies = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr


def reply(**kw):
    _replies.write(json.dumps(kw, default=repr) + "\n")


def describe(e):
    return {"ok": False, "type": type(e).__name__,
            "bases": [c.__name__ for c in type(e).__mro__],
            "code": getattr(e, "code", None), "message": str(e),
            "trace": traceback.format_exc()}


def main():
    import ringd
    import scenarios

    try:
        comm = ringd.open()
    except Exception as e:  # the test reads why
        reply(**describe(e))
        return 1
    reply(ok=True, result={"rank": comm.rank, "size": comm.size})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["name"] == "quit":
            break
        try:
            result = getattr(scenarios, cmd["name"])(comm, *cmd["args"])
            reply(ok=True, result=result)
        except Exception as e:
            reply(**describe(e))
    comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
