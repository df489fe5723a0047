"""Cross-checks the Feishu emulator against Feishu's official Python SDK (PyPI `lark-oapi`).

Run by tests/sdk/run (scripts/test runs it), which installs the SDK into a throwaway virtual
environment and starts the emulator: `tests/sdk/run`. By hand, the same steps:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install lark-oapi
    cargo run -p emulator --bin feishu-emulator -- --app cli_sdk_check:secret:http://127.0.0.1:9768/callback
    /tmp/venv/bin/python tests/sdk/lark_oapi_check.py '<the JSON line it printed>'

Each check drives the emulator through the SDK's own client and request builders, so what the
SDK sends (booleans as Python's True/False, user_id_type) and what it parses (the envelope, error
bodies) is judged by the SDK, not by our client.
"""

import json
import sys

import lark_oapi as lark
from lark_oapi.api.calendar.v4 import GetCalendarEventRequest, PrimaryCalendarRequest
from lark_oapi.api.contact.v3 import GetUserRequest
from lark_oapi.api.task.v2 import ListTaskRequest


def main() -> int:
    info = json.loads(sys.argv[1])
    client = (
        lark.Client.builder()
        .app_id("cli_sdk_check")
        .app_secret("secret")
        .domain(info["base_url"])
        .log_level(lark.LogLevel.ERROR)
        # The calls go as the signed-in user: without this the SDK fetches a tenant token first.
        .enable_set_token(True)
        .build()
    )
    as_user = lark.RequestOption.builder().user_access_token(info["user_access_token"]).build()
    failures = []

    def check(name, ok, detail=""):
        print(("ok   " if ok else "FAIL ") + name + (f": {detail}" if detail else ""))
        if not ok:
            failures.append(name)

    for completed in (False, True):
        req = ListTaskRequest.builder().type("my_tasks").completed(completed).page_size(50).build()
        resp = client.task.v2.task.list(req, as_user)
        check(f"task list completed={completed}", resp.success(), f"{resp.code} {resp.msg}")
        if resp.success():
            done = [t.completed_at not in (None, "", "0") for t in resp.data.items or []]
            check(f"task list completed={completed} filters", all(d == completed for d in done), str(done))

    primary = client.calendar.v4.calendar.primary(PrimaryCalendarRequest.builder().build(), as_user)
    check("primary calendar", primary.success(), f"{primary.code} {primary.msg}")
    calendar_id = primary.data.calendars[0].calendar.calendar_id

    events = lark.BaseRequest.builder().http_method(lark.HttpMethod.GET).uri(
        f"/open-apis/calendar/v4/calendars/{calendar_id}/events/instance_view"
        "?start_time=1700000000&end_time=1702000000"
    ).token_types({lark.AccessTokenType.USER}).build()
    listed = client.request(events, as_user)
    check("instance view", listed.success(), f"{listed.code} {listed.msg}")

    me = client.contact.v3.user.get(
        GetUserRequest.builder().user_id("ou_demo_linxiao").user_id_type("open_id").build(), as_user
    )
    check("contact user by open_id", me.success(), f"{me.code} {me.msg}")
    if me.success():
        by_union = client.contact.v3.user.get(
            GetUserRequest.builder().user_id(me.data.user.union_id).user_id_type("union_id").build(),
            as_user,
        )
        check("contact user by union_id", by_union.success() and by_union.data.user.open_id == "ou_demo_linxiao")
    nobody = client.contact.v3.user.get(GetUserRequest.builder().user_id("ou_nobody").build(), as_user)
    check("unknown user is 41012", nobody.code == 41012, f"{nobody.code} {nobody.msg}")

    nowhere = client.request(
        lark.BaseRequest.builder().http_method(lark.HttpMethod.GET).uri("/open-apis/task/v2/nowhere")
        .token_types({lark.AccessTokenType.USER}).build(),
        as_user,
    )
    check("unknown route answers in the envelope", nowhere.code == 99991201, f"{nowhere.code} {nowhere.msg}")
    wrong = client.request(
        lark.BaseRequest.builder().http_method(lark.HttpMethod.PUT).uri("/open-apis/task/v2/tasks")
        .token_types({lark.AccessTokenType.USER}).build(),
        as_user,
    )
    check("wrong method answers in the envelope", wrong.code == 99991301, f"{wrong.code} {wrong.msg}")

    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
