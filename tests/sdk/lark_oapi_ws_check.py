"""Cross-checks the emulator's bot, cards and long connection against Feishu's official Python SDK.

Run by tests/sdk/run after lark_oapi_check.py, against the same emulator. The SDK's own clients do
everything the app would: its tenant-token client sends a JSON 2.0 card as the bot and updates it,
and its long-connection client (`lark_oapi.ws.Client` with an `EventDispatcherHandler` that
registers the `card.action.trigger` callback) connects to the emulator. The check then clicks the
card through the emulator's test hook and requires that the SDK's handler received Feishu's
callback and that its answer (toast and card) reached the emulator unchanged; also that the SDK's
ping was answered with a pong the SDK applied. Fails loudly when the callback never arrives.
"""

import json
import sys
import threading
import time
import urllib.request

import lark_oapi as lark
from lark_oapi.api.im.v1 import (
    CreateMessageRequest,
    CreateMessageRequestBody,
    PatchMessageRequest,
    PatchMessageRequestBody,
)
from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

APP_ID = "cli_sdk_check"
APP_SECRET = "secret"
USER = "ou_demo_linxiao"

CARD = {
    "schema": "2.0",
    "config": {"update_multi": True},
    "header": {"title": {"tag": "plain_text", "content": "发消息到 产品周会"}, "template": "orange"},
    "body": {"elements": [
        {"tag": "markdown", "content": "**内容**：明天下午 3 点评审"},
        {"tag": "form", "name": "decision", "elements": [
            {"tag": "input", "name": "reason", "placeholder": {"tag": "plain_text", "content": "理由"}},
            {"tag": "button", "name": "approve", "type": "primary", "form_action_type": "submit",
             "text": {"tag": "plain_text", "content": "批准"},
             "behaviors": [{"type": "callback", "value": {"call_id": "sdk-1", "decision": "approve"}}]},
        ]},
    ]},
}

DECIDED = {
    "schema": "2.0",
    "config": {"update_multi": True},
    "header": {"title": {"tag": "plain_text", "content": "已批准"}, "template": "green"},
    "body": {"elements": [{"tag": "markdown", "content": "林晓 批准了"}]},
}


def hook(base_url, method, path, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def main() -> int:
    info = json.loads(sys.argv[1])
    base_url = info["base_url"]
    failures = []

    def check(name, ok, detail=""):
        # Details only for failures: the successful answers are long.
        print(("ok   " if ok else "FAIL ") + name + (f": {detail}" if detail and not ok else ""))
        if not ok:
            failures.append(name)

    # The bot's side, through the SDK's own tenant-token handling (no enable_set_token).
    bot = (lark.Client.builder().app_id(APP_ID).app_secret(APP_SECRET).domain(base_url)
           .log_level(lark.LogLevel.ERROR).build())
    sent = bot.im.v1.message.create(
        CreateMessageRequest.builder().receive_id_type("open_id").request_body(
            CreateMessageRequestBody.builder().receive_id(USER).msg_type("interactive")
            .content(json.dumps(CARD, ensure_ascii=False)).build()).build())
    check("bot sends a JSON 2.0 card", sent.success(), f"{sent.code} {sent.msg}")
    if not sent.success():
        return 1
    message_id = sent.data.message_id
    check("the card's sender is the app", sent.data.sender.sender_type == "app"
          and sent.data.sender.id == APP_ID, f"{sent.data.sender.sender_type} {sent.data.sender.id}")
    patched = bot.im.v1.message.patch(
        PatchMessageRequest.builder().message_id(message_id).request_body(
            PatchMessageRequestBody.builder().content(json.dumps(CARD, ensure_ascii=False)).build()).build())
    check("bot updates its card", patched.success(), f"{patched.code} {patched.msg}")
    bad = bot.im.v1.message.create(
        CreateMessageRequest.builder().receive_id_type("open_id").request_body(
            CreateMessageRequestBody.builder().receive_id(USER).msg_type("interactive")
            .content('{"schema": "2.0", "body": {"elements": [{"tag": "action"}]}}').build()).build())
    check("a 1.0 module in a 2.0 card is 230099", bad.code == 230099, f"{bad.code} {bad.msg}")

    # The long connection, through the SDK's own client.
    received = []

    def on_card_action(data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        received.append(data)
        return P2CardActionTriggerResponse({
            "toast": {"type": "success", "content": "已批准", "i18n": {"zh_cn": "已批准", "en_us": "Approved"}},
            "card": {"type": "raw", "data": DECIDED},
        })

    handler = (lark.EventDispatcherHandler.builder("", "")
               .register_p2_card_action_trigger(on_card_action).build())
    ws = lark.ws.Client(APP_ID, APP_SECRET, event_handler=handler, domain=base_url,
                        log_level=lark.LogLevel.ERROR, auto_reconnect=False)
    configured = []
    original_configure = ws._configure

    def counting_configure(conf):
        configured.append(conf.PingInterval)
        original_configure(conf)

    # The endpoint's answer configures the client once; every pong it reads does so again.
    ws._configure = counting_configure
    threading.Thread(target=ws.start, daemon=True).start()

    connected = False
    for _ in range(100):
        status, state = hook(base_url, "GET", "/_emulator/long_connection")
        if status == 200 and any(app == APP_ID for app, _ in state["connections"]):
            connected = True
            break
        time.sleep(0.05)
    check("the SDK's long-connection client connects", connected)
    if not connected:
        return 1

    for _ in range(100):
        if len(configured) >= 2:
            break
        time.sleep(0.05)
    _, state = hook(base_url, "GET", "/_emulator/long_connection")
    check("the SDK's ping is answered with a pong it applies",
          state["pings"].get(APP_ID, 0) >= 1 and len(configured) >= 2,
          f"pings {state['pings']}, configured {configured}")

    status, outcome = hook(base_url, "POST", f"/_emulator/cards/{message_id}/click",
                           {"name": "approve", "form_value": {"reason": "看过了"}, "timeout_ms": 5000})
    check("the click reaches the SDK's handler and it answers", status == 200 and len(received) == 1,
          f"HTTP {status} {outcome}")
    if status != 200 or not received:
        print("FAIL the card callback never arrived at the SDK's handler", file=sys.stderr)
        return 1
    data = received[0]
    check("the SDK parses the callback as card.action.trigger", data.header.event_type == "card.action.trigger"
          and data.header.app_id == APP_ID and data.header.event_id == outcome["event_id"])
    check("operator, value, form and message reach the handler",
          data.event.operator.open_id == USER
          and data.event.action.value == {"call_id": "sdk-1", "decision": "approve"}
          and data.event.action.name == "approve"
          and data.event.action.form_value == {"reason": "看过了"}
          and data.event.context.open_message_id == message_id,
          json.dumps(lark.JSON.marshal(data.event), ensure_ascii=False))
    check("the handler's toast reaches Feishu unchanged",
          outcome["toast"] == {"type": "success", "content": "已批准",
                               "i18n": {"zh_cn": "已批准", "en_us": "Approved"}}, str(outcome["toast"]))
    check("the handler's card replaces the card", outcome["updated"] and outcome["card"] == DECIDED,
          str(outcome.get("card_error")))
    status, card = hook(base_url, "GET", f"/_emulator/cards/{message_id}")
    check("the card keeps every version",
          [v["source"] for v in card["versions"]] == ["send", "patch", "callback"], str(card.get("versions")))

    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
