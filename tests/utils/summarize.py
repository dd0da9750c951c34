#!/usr/bin/env python3
"""Prints lit's xunit results as one closing line: 'N passed, N failed, N skipped'."""
import sys
import xml.etree.ElementTree as ET


def main(path):
    passed = failed = skipped = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
