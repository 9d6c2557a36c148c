"""The pass/fail tally the vector runners print (one "ok - " / "not ok - " line a check)."""


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what):
        print(("ok - " if ok else "not ok - ") + what)
        self.passed, self.failed = self.passed + bool(ok), self.failed + (not ok)
        return ok

    def end(self):
        """Prints the totals; the exit status: 1 if any check failed."""
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0
