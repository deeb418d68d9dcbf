import pytest

from agentrl.swe.report import Outcome, files_of_tests, first_failure, new_files, node_id, parse_junit, patch_files

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="6">
<testcase classname="tests.test_x.TestA" name="test_one" file="tests/test_x.py" line="3" time="0.001"/>
<testcase classname="tests.test_x.TestA.TestInner" name="test_p[a.b-1]" file="tests/test_x.py" line="9"/>
<testcase classname="tests.test_x" name="test_fail" file="tests/test_x.py" line="12">
  <failure message="AssertionError: assert 1 == 2">long traceback</failure></testcase>
<testcase classname="test_top" name="test_skip" file="test_top.py" line="1"><skipped message="no"/></testcase>
<testcase classname="test_top" name="test_err" file="test_top.py" line="5"><error message="boom"/></testcase>
<testcase classname="test_top" name="test_sub" file="test_top.py" line="7"/>
<testcase classname="test_top" name="test_sub" file="test_top.py" line="7"><failure message="subtest"/></testcase>
</testsuite></testsuites>"""


def test_junit_report_gives_swebench_test_ids_and_worst_outcomes():
    outcomes = parse_junit(REPORT)
    assert outcomes == {
        "tests/test_x.py::TestA::test_one": Outcome.PASSED,
        "tests/test_x.py::TestA::TestInner::test_p[a.b-1]": Outcome.PASSED,
        "tests/test_x.py::test_fail": Outcome.FAILED,
        "test_top.py::test_skip": Outcome.SKIPPED,
        "test_top.py::test_err": Outcome.ERROR,
        "test_top.py::test_sub": Outcome.FAILED,  # a failing subtest fails its test
    }
    assert first_failure(REPORT, "tests/test_x.py::test_fail") == "AssertionError: assert 1 == 2"
    assert first_failure(REPORT, "tests/test_x.py::test_fail", traceback=True) == "long traceback"
    assert first_failure(REPORT, "test_top.py::test_sub", traceback=True) == ""


def test_node_id_without_file_attribute_and_bad_reports():
    assert node_id(None, "tests.test_x.TestA", "test_one") == "tests.test_x.TestA::test_one"
    with pytest.raises(ValueError, match="not a JUnit"):
        parse_junit("PASSED tests/test_x.py::test_one")
    with pytest.raises(ValueError, match="root element"):
        parse_junit("<html/>")


PATCH = """diff --git a/pkg/mod.py b/pkg/mod.py
index 1..2 100644
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1 +1 @@
-a
+b
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1 @@
+def test(): pass
diff --git a/old.py b/old.py
deleted file mode 100644
--- a/old.py
+++ /dev/null
@@ -1 +0,0 @@
-x
"""


def test_patch_files():
    assert patch_files(PATCH) == ["pkg/mod.py", "tests/test_new.py", "old.py"]
    assert new_files(PATCH) == ["tests/test_new.py"]
    assert patch_files("") == [] and new_files("") == []
    assert files_of_tests(["a.py::t1", "b.py::C::t", "a.py::t2"]) == ["a.py", "b.py"]
