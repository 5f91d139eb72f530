#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governor.settings")
    from django.core.management import execute_from_command_line

    from governor.startup import prepare

    prepare()

    execute_from_command_line(sys.argv)
