from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from governor.models import Project
from governor.services.projects import project_create, project_set

SETTABLE = {
    "review_mode": str,
    "max_attempts": int,
    "max_checks": int,
    "max_file_bytes": int,
    "review_ttl_seconds": int,
    "required_approvals": int,
    "authoring_mode": str,
    "unattended_evidence": str,
    "reference_ref": str,
}


class Command(BaseCommand):
    help = "Create a project or change its policy."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create")
        create.add_argument("slug")
        create.add_argument("--name", default="")
        create.add_argument("--review-mode", choices=["required", "off"], default="required")
        create.add_argument("--workspace-root", action="append", default=[])
        change = sub.add_parser("set")
        change.add_argument("slug")
        change.add_argument("--review-mode", choices=["required", "off"])
        change.add_argument("--authoring-mode",
                            choices=["current-agent", "auxiliary-model", "manual"])
        for name in ("max_attempts", "max_checks", "max_file_bytes", "review_ttl_seconds",
                     "required_approvals"):
            change.add_argument("--" + name.replace("_", "-"), type=int)
        change.add_argument("--workspace-root", action="append")
        change.add_argument("--signed-approvals", choices=["required", "off"],
                            help="required: every approval must be signed with the reviewer's "
                                 "passkey")
        change.add_argument("--protected-paths", metavar="P1,P2",
                            help="comma-separated patterns no contract may change unless a "
                                 "person opens them at review ('' protects nothing)")
        change.add_argument("--runner-control-exempt", metavar="ENTRY=REASON", action="append",
                            help="a built-in runner-control entry (rules §17.3) this project "
                                 "does not protect, and why; repeat for several (the list "
                                 "replaces the current one; '' alone clears it)")
        change.add_argument("--delivery-review", choices=["off", "required"],
                            help="required: a person reviews the delivered change before a "
                                 "contract whose checks all pass is certified")
        change.add_argument("--require-discriminating", choices=["on", "off"],
                            help="on: refuse a contract whose critical claim has no check "
                                 "that fails before the work, and a test run none of whose "
                                 "tests failed on the contract-start tree")
        change.add_argument("--reference-ref", metavar="REF",
                            help="the git ref whose tree is every path session's reference, "
                                 "e.g. origin/main ('' : the commit HEAD names when the "
                                 "session is created)")
        change.add_argument("--unattended-evidence", choices=["any", "operator"],
                            help="operator: with review off, refuse a contract with a critical "
                                 "claim that rests only on evidence the agent can author")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["action"] == "create":
                with transaction.atomic():  # a bad root leaves no project behind
                    project = project_create(slug=options["slug"], name=options["name"],
                                             review_mode=options["review_mode"])
                    if options["workspace_root"]:
                        project_set(project=project, workspace_roots=options["workspace_root"])
                self.stdout.write(f"created project {project.slug}")
                return
            found = Project.objects.filter(slug=options["slug"]).first()
            if found is None:
                raise CommandError(f"no project {options['slug']!r}")
            project = found
            changes: dict[str, Any] = {
                name: options[name] for name in SETTABLE if options.get(name) is not None
            }
            if options.get("workspace_root"):
                changes["workspace_roots"] = options["workspace_root"]
            if options.get("signed_approvals"):
                changes["require_signed_approvals"] = options["signed_approvals"] == "required"
            if options.get("protected_paths") is not None:
                changes["protected_paths"] = [pattern.strip() for pattern in
                                              options["protected_paths"].split(",")
                                              if pattern.strip()]
            if options.get("runner_control_exempt") is not None:
                changes["runner_control_exempt"] = [
                    {"entry": entry, "reason": reason} for entry, _, reason in
                    (item.partition("=") for item in options["runner_control_exempt"] if item)]
            if options.get("delivery_review"):
                changes["delivery_review"] = options["delivery_review"]
            if options.get("require_discriminating"):
                changes["require_discriminating_evidence"] = (
                    options["require_discriminating"] == "on")
            if not changes:
                raise CommandError("nothing to set")
            project_set(project=project, **changes)
            self.stdout.write(f"updated project {project.slug}: {', '.join(changes)}")
        except ValidationError as exc:
            raise CommandError("; ".join(
                f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
            )) from None
