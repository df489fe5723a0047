"""The Python runtime API of the seed (python-runtime-reference), as user code sees it.

Every class, function and global the seed documents lives here, with the seed's names, fields and
behaviour. Objects cross to the host as JSON in the agent crate's serde shapes (``_to_json`` /
``_from_json``), so a ``Part`` made here is the same ``Part`` the engine stores.

The host is reached through the functions bound by ``_bind_host`` (the component's imports); this
module never touches files, sockets or the environment itself.
"""

import base64 as _base64
import copy as _copy
import enum as _enum
import json as _json
import re as _re

# The host functions (start_tool, start_http, wait, sleep, events); bound by the guest at start-up.
_host = None


def _bind_host(host):
    global _host
    _host = host


# --------------------------------------------------------------------------------------------
# JSON helpers


# How deep a value may nest: the host's JSON reader stops at 128 levels, and the answer wraps the
# value in a few of its own.
_MAX_DEPTH = 100
# The integers JSON carries exactly here: larger ones would arrive as approximate floats.
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_SURROGATE = _re.compile("[\ud800-\udfff]")


def _int_text(value):
    try:
        return str(value)
    except ValueError:  # more digits than Python will print
        return f"an integer of {value.bit_length()} bits"


def _jsonable(value, what="value", _depth=0):
    """Turns a Python value into plain JSON data; the seed's classes become their wire shape.
    What JSON cannot carry faithfully (NaN, infinities, integers past 64 bits, lone surrogates,
    nesting past 100 levels) is refused with a ValueError that says what to do instead."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        if not value.isascii():
            bad = _SURROGATE.search(value)
            if bad is not None:
                raise ValueError(
                    f"{what}: the string holds {bad.group()!r}, a lone surrogate, which is not "
                    "valid Unicode and cannot be sent; build strings from whole characters"
                )
        return value
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise ValueError(
                f"{what}: {_int_text(value)} does not fit in 64 bits, the most a JSON number "
                "carries exactly here; send it as a string (str(n))"
            )
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(
                f"{what}: {value!r} has no JSON form; send None or a string instead"
            )
        return value
    if _depth >= _MAX_DEPTH:
        raise ValueError(f"{what}: nested deeper than {_MAX_DEPTH} levels, more than JSON is sent with")
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{what}: dictionary keys must be strings, not {type(key).__name__}")
            _jsonable(key, what)
            out[key] = _jsonable(item, what, _depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(item, what, _depth + 1) for item in value]
    if isinstance(value, (bytes, bytearray)):
        # Bytes have no JSON form; base64 is how the data model carries them (Blob.data).
        return _base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, _enum.Enum):
        return _jsonable(value.value, what, _depth)
    to_json = getattr(value, "_to_json", None)
    if callable(to_json):
        return _jsonable(to_json(), what, _depth)
    raise TypeError(f"{what}: {type(value).__name__} is not JSON serializable")


def _opt(d, key, convert=None):
    value = d.get(key)
    if value is None or convert is None:
        return value
    return convert(value)


def _put(out, key, value):
    """Adds a field the way the Rust side writes it: absent when unset."""
    if value is not None:
        out[key] = value


class _Model:
    """Shared equality and repr for the data classes: fields are the instance's public attributes."""

    def __eq__(self, other):
        return type(self) is type(other) and self._to_json() == other._to_json()

    def __repr__(self):
        fields = ", ".join(
            f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_") and v is not None
        )
        return f"{type(self).__name__}({fields})"


# --------------------------------------------------------------------------------------------
# Content


class Blob(_Model):
    """Inline bytes. ``raw_data`` holds the bytes; ``data`` is the same bytes base64-encoded."""

    def __init__(self, mime_type=None, data=None, raw_data=None, display_name=None, transcript=None):
        self.display_name = display_name
        self.mime_type = mime_type
        self.raw_data = bytes(raw_data) if raw_data is not None else None
        if data is not None:
            self.data = data
        self._transcript = transcript

    @property
    def data(self):
        if self.raw_data is None:
            return None
        return _base64.b64encode(self.raw_data)

    @data.setter
    def data(self, value):
        if value is None:
            self.raw_data = None
        else:
            self.raw_data = _base64.b64decode(value)

    def transcript(self):
        """The cached transcript; audio blobs only."""
        if self.mime_type and self.mime_type[:6].lower() == "audio/":
            return self._transcript
        return None

    @classmethod
    def from_json(cls, data):
        """A blob holding a JSON string, with mime_type ``application/json``."""
        return cls(mime_type="application/json", raw_data=data.encode("utf-8"))

    def _to_json(self):
        out = {}
        _put(out, "display_name", self.display_name)
        _put(out, "mime_type", self.mime_type)
        if self.raw_data:
            out["data"] = _base64.b64encode(self.raw_data).decode("ascii")
        _put(out, "transcript", self._transcript)
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(
            mime_type=d.get("mime_type"),
            data=d.get("data"),
            display_name=d.get("display_name"),
            transcript=d.get("transcript"),
        )


class FunctionCall(_Model):
    """A function call predicted by the model."""

    def __init__(self, id=None, args=None, name=None):
        self.id = id
        self.args = args
        self.name = name

    def _to_json(self):
        out = {}
        _put(out, "id", self.id)
        out["name"] = self.name if self.name is not None else ""
        out["args"] = _jsonable(self.args or {}, "FunctionCall.args")
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(id=d.get("id"), args=d.get("args") or {}, name=d.get("name"))


class FunctionResponse(_Model):
    """The result of a FunctionCall: ``response`` has ``output`` or ``error``, or is the output."""

    def __init__(self, id=None, name=None, response=None):
        self.id = id
        self.name = name
        self.response = response

    def _to_json(self):
        out = {}
        _put(out, "id", self.id)
        out["name"] = self.name if self.name is not None else ""
        out["response"] = _jsonable(self.response or {}, "FunctionResponse.response")
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(id=d.get("id"), name=d.get("name"), response=d.get("response") or {})


# Function names the engine answers itself (agent::content).
_TRANSFER_TO_AGENT = "transfer_to_agent"
_END_SESSION = "end_session"
_CUSTOMIZED_RESPONSE = "customized_response"

class Reasoning(_Model):
    """What a thinking model reasoned before it answered (DeepSeek's and Kimi's reasoning, Claude's
    thinking). Not in the reference: the app's model services add it. ``text`` may be read;
    ``signature`` and ``redacted`` are the service's own and go back exactly as they came."""

    def __init__(self, text="", signature=None, redacted=False):
        self.text = text
        self.signature = signature
        self.redacted = redacted

    def _to_json(self):
        out = {"text": self.text if self.text is not None else ""}
        _put(out, "signature", self.signature)
        if self.redacted:
            out["redacted"] = True
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(
            text=d.get("text") or "",
            signature=d.get("signature"),
            redacted=bool(d.get("redacted")),
        )


# `reasoning` last: the reference's four kinds come first in every message.
_PART_FIELDS = ("text", "function_call", "function_response", "inline_data", "reasoning")


class Part(_Model):
    """One piece of a message. Exactly one field may be set."""

    def __init__(
        self,
        text=None,
        function_call=None,
        function_response=None,
        inline_data=None,
        reasoning=None,
    ):
        self.text = text
        self.function_call = function_call
        self.function_response = function_response
        self.inline_data = inline_data
        # A thinking model's reasoning (see Reasoning); never text, so text() skips it.
        self.reasoning = reasoning
        # An empty Part may be filled in afterwards; two fields at once are wrong from the start.
        self._check(require_one=False)

    def _check(self, require_one=True):
        set_fields = [f for f in _PART_FIELDS if getattr(self, f) is not None]
        if len(set_fields) > 1:
            raise ValueError(
                "a Part may set only one field, but sets " + " and ".join(set_fields)
            )
        if require_one and not set_fields:
            raise ValueError("a Part must set one of " + ", ".join(_PART_FIELDS))

    def text_or_transcript(self):
        if self.text is not None:
            return self.text
        if self.inline_data is not None:
            return self.inline_data.transcript()
        return None

    def has_function_call(self, name):
        return self.function_call is not None and self.function_call.name == name

    def has_function_response(self, name):
        return self.function_response is not None and self.function_response.name == name

    @classmethod
    def from_text(cls, text):
        return cls(text=text)

    @classmethod
    def from_function_call(cls, name, args):
        return cls(function_call=FunctionCall(name=name, args=args))

    @classmethod
    def from_function_response(cls, name, response):
        return cls(function_response=FunctionResponse(name=name, response=response))

    @classmethod
    def from_inline_data(cls, data, mime_type):
        """``data`` is the raw bytes (they become ``inline_data.raw_data``), not base64: the seed
        types it ``bytes`` without saying which, and raw bytes are what a caller has in hand.
        Google's offline library stores the argument as ``Blob.data``, the base64 form."""
        return cls(inline_data=Blob(mime_type=mime_type, raw_data=data))

    @classmethod
    def from_json(cls, data):
        return cls(inline_data=Blob.from_json(data))

    @classmethod
    def from_agent_transfer(cls, agent):
        return cls.from_function_call(_TRANSFER_TO_AGENT, {"agent_name": agent})

    @classmethod
    def from_end_session(cls, *, reason, escalated=False):
        return cls.from_function_call(
            _END_SESSION, {"reason": reason, "session_escalated": escalated}
        )

    @classmethod
    def from_customized_response(
        cls,
        *,
        content,
        disable_barge_in=False,
        enable_dtmf=False,
        dtmf_finish_digit="#",
        dtmf_endpointing_timeout=3,
    ):
        """A call of the engine's ``customized_response`` function with these arguments (snake
        case), which the app answers by showing ``content``; ``content`` is required, as the
        seed's signature has no default for it. The seed says only that the Part carries the
        behaviour; Google's offline library packs the same options as camel-case JSON in an
        ``application/json+agentResponse`` inline blob instead."""
        return cls.from_function_call(
            _CUSTOMIZED_RESPONSE,
            {
                "content": content,
                "disable_barge_in": disable_barge_in,
                "enable_dtmf": enable_dtmf,
                "dtmf_finish_digit": dtmf_finish_digit,
                "dtmf_endpointing_timeout": dtmf_endpointing_timeout,
            },
        )

    def _to_json(self):
        self._check()
        if self.text is not None:
            return {"text": self.text}
        if self.function_call is not None:
            return {"function_call": self.function_call._to_json()}
        if self.function_response is not None:
            return {"function_response": self.function_response._to_json()}
        if self.reasoning is not None:
            return {"reasoning": self.reasoning._to_json()}
        return {"inline_data": self.inline_data._to_json()}

    @classmethod
    def _from_json(cls, d):
        return cls(
            text=d.get("text"),
            function_call=_opt(d, "function_call", FunctionCall._from_json),
            function_response=_opt(d, "function_response", FunctionResponse._from_json),
            inline_data=_opt(d, "inline_data", Blob._from_json),
            reasoning=_opt(d, "reasoning", Reasoning._from_json),
        )


class Content(_Model):
    """One message of the user or the model."""

    def __init__(self, parts=None, role=None):
        self.parts = parts
        self.role = role

    def is_user(self):
        return self.role == "user"

    def is_model(self):
        return self.role == "model"

    def _to_json(self):
        out = {"parts": [_part(p)._to_json() for p in (self.parts or [])]}
        _put(out, "role", self.role)
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(parts=[Part._from_json(p) for p in d.get("parts") or []], role=d.get("role"))


def _part(value):
    """A plain string where a Part is expected is a text part, as people write it."""
    if isinstance(value, str):
        return Part.from_text(value)
    if not isinstance(value, Part):
        raise TypeError(f"expected a Part, got {type(value).__name__}")
    return value


def _content(value, role):
    """Accepts a Content, a Part, a string or a list of parts, for callback return values."""
    if isinstance(value, Content):
        return value
    if isinstance(value, (str, Part)):
        return Content(parts=[_part(value)], role=role)
    if isinstance(value, list):
        return Content(parts=[_part(p) for p in value], role=role)
    raise TypeError(f"expected Content, got {type(value).__name__}")


# --------------------------------------------------------------------------------------------
# Events


class EventActions(_Model):
    """What an event did besides carrying content. The flags are booleans, ``False`` when unset,
    as the seed types them (Google's offline library leaves them ``None``)."""

    def __init__(
        self,
        skip_summarization=False,
        state_delta=None,
        artifact_delta=None,
        transfer_to_agent=None,
        escalate=False,
        requested_auth_configs=None,
        end_invocation=False,
    ):
        self.skip_summarization = skip_summarization
        self.state_delta = state_delta if state_delta is not None else {}
        self.artifact_delta = artifact_delta if artifact_delta is not None else {}
        self.transfer_to_agent = transfer_to_agent
        self.escalate = escalate
        self.requested_auth_configs = (
            requested_auth_configs if requested_auth_configs is not None else {}
        )
        self.end_invocation = end_invocation

    def _to_json(self):
        out = {}
        if self.skip_summarization:
            out["skip_summarization"] = True
        if self.state_delta:
            out["state_delta"] = _jsonable(self.state_delta, "EventActions.state_delta")
        if self.artifact_delta:
            out["artifact_delta"] = _jsonable(self.artifact_delta, "EventActions.artifact_delta")
        _put(out, "transfer_to_agent", self.transfer_to_agent)
        if self.escalate:
            out["escalate"] = True
        if self.requested_auth_configs:
            out["requested_auth_configs"] = _jsonable(
                self.requested_auth_configs, "EventActions.requested_auth_configs"
            )
        if self.end_invocation:
            out["end_invocation"] = True
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(
            skip_summarization=bool(d.get("skip_summarization")),
            state_delta=d.get("state_delta") or {},
            artifact_delta=d.get("artifact_delta") or {},
            transfer_to_agent=d.get("transfer_to_agent"),
            escalate=bool(d.get("escalate")),
            requested_auth_configs=d.get("requested_auth_configs") or {},
            end_invocation=bool(d.get("end_invocation")),
        )


class Event(_Model):
    """One event of the session."""

    def __init__(
        self,
        id="",
        invocation_id="",
        author="",
        timestamp=0,
        content=None,
        actions=None,
        long_running_tool_ids=None,
        partial=False,
        turn_complete=False,
        error_code=None,
        error_message=None,
        interrupted=False,
        branch=None,
        grounding_metadata=None,
    ):
        self.id = id
        self.invocation_id = invocation_id
        self.author = author
        self.timestamp = timestamp
        self.content = content
        self.actions = actions if actions is not None else EventActions()
        self.long_running_tool_ids = (
            set(long_running_tool_ids) if long_running_tool_ids is not None else set()
        )
        self.partial = partial
        self.turn_complete = turn_complete
        self.error_code = error_code
        self.error_message = error_message
        self.interrupted = interrupted
        self.branch = branch
        self.grounding_metadata = grounding_metadata

    def is_user(self):
        return self.author == "user"

    def is_agent(self, agent_name=None):
        """Whether an agent wrote it (and, given a name, that agent). The user is never an
        agent, as the seed says, even when asked ``is_agent("user")``."""
        if self.is_user():
            return False
        return agent_name is None or self.author == agent_name

    def has_error(self):
        return self.error_code is not None

    def parts(self):
        if self.content is None or not self.content.parts:
            return []
        return list(self.content.parts)

    def _to_json(self):
        out = {
            "id": self.id,
            "invocation_id": self.invocation_id,
            "author": self.author,
            "timestamp": self.timestamp,
        }
        if self.content is not None:
            out["content"] = self.content._to_json()
        actions = self.actions._to_json() if self.actions is not None else {}
        if actions:
            out["actions"] = actions
        if self.long_running_tool_ids:
            out["long_running_tool_ids"] = sorted(self.long_running_tool_ids)
        for flag in ("partial", "turn_complete", "interrupted"):
            if getattr(self, flag):
                out[flag] = True
        _put(out, "error_code", self.error_code)
        _put(out, "error_message", self.error_message)
        _put(out, "branch", self.branch)
        _put(out, "grounding_metadata", self.grounding_metadata)
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(
            id=d.get("id", ""),
            invocation_id=d.get("invocation_id", ""),
            author=d.get("author", ""),
            timestamp=d.get("timestamp", 0),
            content=_opt(d, "content", Content._from_json),
            actions=EventActions._from_json(d.get("actions") or {}),
            long_running_tool_ids=d.get("long_running_tool_ids") or [],
            partial=bool(d.get("partial")),
            turn_complete=bool(d.get("turn_complete")),
            error_code=d.get("error_code"),
            error_message=d.get("error_message"),
            interrupted=bool(d.get("interrupted")),
            branch=d.get("branch"),
            grounding_metadata=d.get("grounding_metadata"),
        )


# --------------------------------------------------------------------------------------------
# Models and tools


class Tool(_Model):
    """A tool: a name and what it is for."""

    def __init__(self, name="", description=""):
        self.name = name
        self.description = description

    def _to_json(self):
        return {"name": self.name, "description": self.description}

    @classmethod
    def _from_json(cls, d):
        return cls(name=d.get("name", ""), description=d.get("description", ""))


class FunctionDeclaration(_Model):
    """A function the model may call."""

    def __init__(self, name=None, description=None, parameters=None):
        self.name = name
        self.description = description
        self.parameters = parameters

    def _to_json(self):
        out = {"name": self.name if self.name is not None else ""}
        _put(out, "description", self.description)
        _put(out, "parameters", _jsonable(self.parameters, "FunctionDeclaration.parameters"))
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(name=d.get("name"), description=d.get("description"), parameters=d.get("parameters"))


class ToolDeclaration(_Model):
    """A tool's schema as shown to the model."""

    def __init__(self, function_declarations=None):
        self.function_declarations = function_declarations

    def _to_json(self):
        return {
            "function_declarations": [d._to_json() for d in self.function_declarations or []]
        }

    @classmethod
    def _from_json(cls, d):
        return cls(
            function_declarations=[
                FunctionDeclaration._from_json(x) for x in d.get("function_declarations") or []
            ]
        )


class GenerateContentConfig(_Model):
    """Optional model settings. ``excluded_tools`` overrides ``tools``."""

    def __init__(self, system_instruction=None, tools=None, excluded_tools=None):
        self.system_instruction = system_instruction
        self.tools = tools
        self.excluded_tools = excluded_tools

    def hide_tool(self, tool_name):
        """Adds tool_name to excluded_tools, once: hiding a tool twice lists it once, since the
        list says which tools the model may not see (Google's offline library appends it again)."""
        if self.excluded_tools is None:
            self.excluded_tools = []
        if tool_name not in self.excluded_tools:
            self.excluded_tools.append(tool_name)

    def _to_json(self):
        out = {}
        if self.system_instruction is not None:
            out["system_instruction"] = _content(self.system_instruction, "user")._to_json()
        if self.tools:
            out["tools"] = [t._to_json() for t in self.tools]
        if self.excluded_tools:
            out["excluded_tools"] = list(self.excluded_tools)
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(
            system_instruction=_opt(d, "system_instruction", Content._from_json),
            tools=[ToolDeclaration._from_json(t) for t in d.get("tools") or []],
            excluded_tools=list(d.get("excluded_tools") or []),
        )


# The seed's `LlmRequest.config` is typed `GeneralContentConfig`; the same class by that name.
GeneralContentConfig = GenerateContentConfig


class LlmRequest(_Model):
    """A request to a model."""

    def __init__(self, model=None, contents=None, config=None):
        self.model = model
        self.contents = contents if contents is not None else []
        self.config = config

    def _to_json(self):
        out = {"contents": [_content(c, "user")._to_json() for c in self.contents]}
        _put(out, "model", self.model)
        if self.config is not None:
            out["config"] = self.config._to_json()
        return out

    @classmethod
    def _from_json(cls, d):
        return cls(
            model=d.get("model"),
            contents=[Content._from_json(c) for c in d.get("contents") or []],
            config=_opt(d, "config", GenerateContentConfig._from_json),
        )


class LlmResponse(_Model):
    """A model's response."""

    def __init__(self, content=None, partial=None):
        self.content = content
        self.partial = partial
        # Fields the engine keeps that the seed does not show (malformed calls), carried through.
        self._extra = {}

    @classmethod
    def from_parts(cls, parts):
        return cls(content=Content(parts=list(parts), role="model"))

    def _to_json(self):
        content = self.content if self.content is not None else Content(parts=[], role="model")
        out = dict(self._extra)
        out["content"] = _content(content, "model")._to_json()
        _put(out, "partial", self.partial)
        return out

    @classmethod
    def _from_json(cls, d):
        response = cls(content=_opt(d, "content", Content._from_json), partial=d.get("partial"))
        response._extra = {k: v for k, v in d.items() if k not in ("content", "partial")}
        return response


class HttpMethod(str, _enum.Enum):
    """The HTTP methods."""

    GET = "GET"
    POST = "POST"
    PUT = "PUT"
    DELETE = "DELETE"
    PATCH = "PATCH"
    HEAD = "HEAD"
    OPTIONS = "OPTIONS"

    def __str__(self):
        return self.value


# --------------------------------------------------------------------------------------------
# Responses from outside


class StatusError(Exception):
    """Raised by ``raise_for_status`` for a response that is not ok."""

    def __init__(self, status_code, reason=""):
        super().__init__(f"{status_code} {reason}".strip())
        self.status_code = status_code
        self.reason = reason


class _Headers(dict):
    """Response headers, looked up without regard to case as HTTP says (``requests`` does too)."""

    def __init__(self, items=()):
        super().__init__()
        for key, value in dict(items).items():
            self[key] = value

    def _find(self, key):
        if isinstance(key, str):
            lower = key.lower()
            for existing in super().keys():
                if existing.lower() == lower:
                    return existing
        return key

    def __getitem__(self, key):
        return super().__getitem__(self._find(key))

    def __setitem__(self, key, value):
        super().__setitem__(self._find(key), value)

    def __delitem__(self, key):
        super().__delitem__(self._find(key))

    def __contains__(self, key):
        return super().__contains__(self._find(key))

    def get(self, key, default=None):
        return super().get(self._find(key), default)


class ExternalResponse:
    """A response from outside Python: a tool call or an HTTP request. Besides the seed's
    ``text``, ``status_code``, ``reason`` and ``ok``, HTTP responses have ``headers`` (any case),
    ``url`` (after redirects) and ``content`` (the body's bytes), as in ``requests``."""

    def __init__(self, text="", status_code=200, reason="", headers=None, url="", content=None):
        self.text = text
        self.status_code = status_code
        self.reason = reason
        self.headers = _Headers(headers or {})
        self.url = url
        self._content = content

    @property
    def ok(self):
        return self.status_code < 400

    @property
    def content(self):
        if self._content is not None:
            return self._content
        return self.text.encode("utf-8")

    def json(self):
        return _json.loads(self.text)

    def raise_for_status(self):
        if not self.ok:
            raise StatusError(self.status_code, self.reason)

    # Reading the body as a dict. Google's published samples treat the answer of
    # ``tools.NAME(...)`` as the tool's dict (``response.get("customer", {})``) while the seed
    # documents this class; both work, so that such code neither breaks nor, worse, has its own
    # ``except`` swallow the AttributeError and take the failure path for every caller. A body
    # that is not a JSON object cannot be read so: that raises, and also says so on stderr,
    # which the app reports, because the code reading it this way often catches everything.

    def _body(self, what):
        if "_parsed" not in self.__dict__:
            try:
                self._parsed = _json.loads(self.text)
            except ValueError:
                self._parsed = _NOT_JSON
        body = self._parsed
        if isinstance(body, dict):
            return body
        shown = self.text if len(self.text) <= 200 else self.text[:200] + "…"
        kind = "text that is not JSON" if body is _NOT_JSON else f"JSON {type(body).__name__}"
        message = (
            f"response{what}: the response (status {self.status_code}) is {kind}, not a JSON "
            f"object, so it cannot be read as a dict: {shown!r}. Check response.ok, and read "
            "response.text or response.json()"
        )
        import sys as _sys

        print(f"ExternalResponse: {message}", file=_sys.stderr)
        raise TypeError(message)

    def get(self, key, default=None):
        """``response.json().get(key, default)``, for code that reads the answer as a dict."""
        return self._body(f".get({key!r})").get(key, default)

    def __getitem__(self, key):
        return self._body(f"[{key!r}]")[key]

    def __contains__(self, key):
        return key in self._body(f" {key!r} in")

    def __iter__(self):
        return iter(self._body(" iteration"))

    def keys(self):
        return self._body(".keys()").keys()

    def values(self):
        return self._body(".values()").values()

    def items(self):
        return self._body(".items()").items()

    def __repr__(self):
        return f"<ExternalResponse [{self.status_code}]>"


    @classmethod
    def _from_json(cls, d):
        body = d.get("body_base64")
        return cls(
            text=d.get("text", ""),
            status_code=d.get("status_code", 0),
            reason=d.get("reason") or "",
            headers=d.get("headers") or {},
            url=d.get("url") or "",
            content=_base64.b64decode(body) if body else None,
        )


# A body that did not parse as JSON (distinct from a body that is JSON null).
_NOT_JSON = object()


def _wait(handle):
    return ExternalResponse._from_json(_json.loads(_host.wait(handle)))


# async_tools calls started and not yet waited for; the guest waits for them when the user's
# function returns, so a call started and never polled still happens.
_started = []


def _drain():
    while _started:
        _started[0]()


class _Future:
    """A tool call under way; call it to wait for (and get) its ExternalResponse."""

    def __init__(self, handle, name):
        self._handle = handle
        self._name = name
        self._response = None
        _started.append(self)

    def __call__(self):
        if self._response is None:
            try:
                self._response = _wait(self._handle)
            finally:
                if self in _started:
                    _started.remove(self)
        return self._response

    result = __call__

    def __repr__(self):
        state = "done" if self._response is not None else "pending"
        return f"<tool call {self._name} {state}>"


def _tool_args(name, args, kwargs):
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise TypeError(f"tools.{name}() takes a dict of arguments, not {type(args).__name__}")
    merged = dict(args)
    merged.update(kwargs)
    return _json.dumps(_jsonable(merged, f"tools.{name} arguments"), ensure_ascii=False)


class Tools:
    """Calls the agent's tools synchronously: ``tools.NAME(args)`` returns an ExternalResponse."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def call(args=None, **kwargs):
            return _wait(_host.start_tool(name, _tool_args(name, args, kwargs)))

        call.__name__ = name
        return call

    def __getitem__(self, name):
        return self.__getattr__(name)


class AsyncTools:
    """Calls the agent's tools asynchronously: ``async_tools.NAME(args)`` returns a future; call
    the future to wait for its ExternalResponse."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def start(args=None, **kwargs):
            return _Future(_host.start_tool(name, _tool_args(name, args, kwargs)), name)

        start.__name__ = name
        return start

    def __getitem__(self, name):
        return self.__getattr__(name)


def _pairs(value, what):
    """``params``/``data`` as (key, value) pairs, the way ``requests`` takes them: a dict whose
    values may be lists (a repeated key), a list of pairs, or a query string. None values are
    left out."""
    from urllib.parse import parse_qsl

    if isinstance(value, (str, bytes)):
        text = value.decode("utf-8") if isinstance(value, bytes) else value
        return parse_qsl(text.lstrip("?"), keep_blank_values=True)
    items = value.items() if isinstance(value, dict) else value
    pairs = []
    for item in items:
        try:
            key, val = item
        except (TypeError, ValueError):
            raise TypeError(f"ces_requests {what}: expected a dict or a list of (key, value) pairs") from None
        vals = val if isinstance(val, (list, tuple)) else [val]
        for v in vals:
            if v is not None:
                pairs.append((str(key), v.decode("utf-8") if isinstance(v, bytes) else str(v)))
    return pairs


def _grouped(pairs):
    """Pairs as the host takes them: each key once, a repeated key's values as a list in order."""
    out = {}
    for key, value in pairs:
        if key in out:
            if not isinstance(out[key], list):
                out[key] = [out[key]]
            out[key].append(value)
        else:
            out[key] = value
    return out


class Requests:
    """HTTP calls in the style of the ``requests`` library, made by the host. Writes (POST, PUT,
    DELETE, PATCH) are sent only once the user approved them, and only to hosts the user allowed
    for this file.

    Takes ``requests``' arguments: ``params`` (a dict, lists for repeated keys, a list of pairs or
    a string), ``data`` (a dict or pairs as a form, str or bytes as the body), ``json``,
    ``headers``, ``cookies``, ``auth`` (a (user, password) pair: Basic), ``timeout``,
    ``allow_redirects`` and ``verify`` (certificates are always checked: only True is accepted).
    ``files``, ``proxies``, ``cert`` and ``stream`` are refused: there are no files, the app
    chooses the route, and bodies arrive whole."""

    def request(
        self,
        method,
        url,
        params=None,
        data=None,
        json=None,
        headers=None,
        cookies=None,
        auth=None,
        timeout=None,
        allow_redirects=True,
        verify=True,
        **kwargs,
    ):
        method = HttpMethod(str(method).upper())
        name = f"ces_requests.{method.value.lower()}()"
        for refused, why in (
            ("files", "there are no files in the sandbox; send the content as data or json"),
            ("proxies", "the app chooses how requests reach the network"),
            ("cert", "there are no files in the sandbox to read a certificate from"),
            ("stream", "responses arrive whole"),
        ):
            if kwargs.pop(refused, None) is not None:
                raise TypeError(f"{name}: {refused}= is not supported: {why}")
        unknown = sorted(kwargs)
        if unknown:
            raise TypeError(f"{name} got unexpected arguments: {', '.join(unknown)}")
        if verify is not True:
            raise ValueError(f"{name}: verify={verify!r} is not supported: certificates are always checked")
        request = {"method": method.value, "url": str(url)}
        if params:
            request["params"] = _grouped(_pairs(params, "params"))
        head = {}
        for key, value in (headers or {}).items():
            if value is not None:
                head[str(key)] = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        if cookies:
            jar = "; ".join(f"{k}={v}" for k, v in dict(cookies).items())
            head["Cookie"] = f"{head['Cookie']}; {jar}" if "Cookie" in head else jar
        if auth is not None:
            if not (isinstance(auth, (tuple, list)) and len(auth) == 2):
                raise TypeError(f"{name}: auth must be a (user, password) pair")
            user, password = (a.decode("latin-1") if isinstance(a, bytes) else str(a) for a in auth)
            token = _base64.b64encode(f"{user}:{password}".encode("latin-1")).decode("ascii")
            head["Authorization"] = f"Basic {token}"
        if head:
            request["headers"] = head
        if json is not None and data is None:
            request["json"] = _jsonable(json, "ces_requests json")
        if data is not None:
            if isinstance(data, (dict, list, tuple)):
                request["form"] = _grouped(_pairs(data, "data"))
            elif isinstance(data, (bytes, bytearray)):
                try:
                    request["data"] = bytes(data).decode("utf-8")
                except UnicodeDecodeError:
                    request["data_base64"] = _base64.b64encode(bytes(data)).decode("ascii")
            else:
                request["data"] = str(data)
        if timeout is not None:
            if isinstance(timeout, (tuple, list)):
                # (connect, read): the call takes at most their sum.
                timeout = sum(float(t) for t in timeout if t is not None)
            request["timeout"] = float(timeout)
        if not allow_redirects:
            request["allow_redirects"] = False
        return _wait(_host.start_http(_json_dumps(request)))

    def get(self, url, params=None, **kwargs):
        return self.request("GET", url, params=params, **kwargs)

    def post(self, url, data=None, json=None, **kwargs):
        return self.request("POST", url, data=data, json=json, **kwargs)

    def put(self, url, data=None, json=None, **kwargs):
        return self.request("PUT", url, data=data, json=json, **kwargs)

    def delete(self, url, **kwargs):
        return self.request("DELETE", url, **kwargs)

    def patch(self, url, data=None, json=None, **kwargs):
        return self.request("PATCH", url, data=data, json=json, **kwargs)

    def head(self, url, **kwargs):
        # requests does not follow redirects for HEAD unless asked.
        kwargs.setdefault("allow_redirects", False)
        return self.request("HEAD", url, **kwargs)

    def options(self, url, **kwargs):
        return self.request("OPTIONS", url, **kwargs)


def _json_dumps(value):
    return _json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# Contexts


class CallbackContext:
    """Session information while a callback runs. ``variables`` and ``state`` are one dict."""

    def __init__(self, invocation_id="", agent_name="", session_id="", state=None, user_content=None, events=None):
        self.invocation_id = invocation_id
        self.agent_name = agent_name
        self.session_id = session_id
        self.variables = state if state is not None else {}
        self.user_content = user_content
        self._events = events

    @property
    def state(self):
        return self.variables

    @state.setter
    def state(self, value):
        self.variables = value

    @property
    def events(self):
        # Fetched on first use: a long session's history is large and most code never reads it.
        if self._events is None:
            self._events = [Event._from_json(e) for e in _json.loads(_host.events())]
        return self._events

    @events.setter
    def events(self, value):
        self._events = value

    def get_variable(self, key, default=None):
        return self.variables.get(key, default)

    def set_variable(self, key, value):
        self.variables[key] = value

    def remove_variable(self, key):
        """``del variables[key]``: a KeyError when it is not set, as ``del`` gives."""
        del self.variables[key]

    def _complete_events(self):
        # Streamed chunks preview a later complete event; counting them would repeat text.
        return [e for e in self.events if not e.partial]

    def _last_block(self, belongs):
        block = []
        for event in reversed(self._complete_events()):
            if belongs(event):
                block.append(event)
            elif block:
                break
        block.reverse()
        return [p for e in block for p in e.parts()]

    def get_last_user_input(self):
        return self._last_block(lambda e: e.is_user())

    def get_last_agent_output(self):
        return self._last_block(lambda e: e.is_agent())

    def parts(self):
        return [p for e in self._complete_events() for p in e.parts()]


class ToolContext(CallbackContext):
    """Session information while a tool runs: a CallbackContext plus the call's id."""

    def __init__(self, function_call_id="", actions=None, **kwargs):
        super().__init__(**kwargs)
        self.function_call_id = function_call_id
        self.actions = actions if actions is not None else EventActions()


# --------------------------------------------------------------------------------------------
# Globals

# The context of the running tool or callback; the guest sets it before user code runs.
context = CallbackContext()


def get_variable(key, default=None):
    """``context.variables.get(key, default)``."""
    return context.variables.get(key, default)


def set_variable(key, value):
    """``context.variables[key] = value``."""
    context.variables[key] = value


def remove_variable(key):
    """``del context.variables[key]``: a KeyError when it is not set, as ``del`` gives."""
    del context.variables[key]


tools = Tools()
async_tools = AsyncTools()
ces_requests = Requests()


def tool(func=None, *, name=None, description=None, requires_approval=False, scopes=(), deduplicates=False, preview=None):
    """Declares a function of the file as a tool, and how the app treats it.

    ``@tool`` or ``@tool(requires_approval=True, scopes=["im:message"])``. ``requires_approval``
    makes every call wait for the user's approval (and lets the tool send writes through
    ``ces_requests``); ``scopes`` are the Feishu permissions it needs; ``deduplicates`` says the
    service it writes to drops repeated idempotency keys. ``preview`` is a function of the file
    taking the tool's arguments and returning the approval card's one-line summary (a str), or
    a dict with ``summary`` and ``fields`` ({label: value}); a function named
    ``preview_<tool function>`` is found without being named here. Without a decorator, the
    function named like its file is the file's tool.
    """

    def mark(f):
        f.__companion_tool__ = {
            "name": name or f.__name__,
            "description": description,
            "requires_approval": bool(requires_approval),
            "scopes": [str(s) for s in scopes],
            "deduplicates": bool(deduplicates),
            "preview": getattr(preview, "__name__", preview),
        }
        return f

    if func is not None:
        return mark(func)
    return mark


# The names user code sees as globals (and as attributes of `ces_public`).
__all__ = [
    "AsyncTools",
    "Blob",
    "CallbackContext",
    "Content",
    "Event",
    "EventActions",
    "ExternalResponse",
    "FunctionCall",
    "FunctionDeclaration",
    "FunctionResponse",
    "GeneralContentConfig",
    "GenerateContentConfig",
    "HttpMethod",
    "LlmRequest",
    "LlmResponse",
    "Part",
    "Reasoning",
    "Requests",
    "StatusError",
    "Tool",
    "ToolContext",
    "ToolDeclaration",
    "Tools",
    "async_tools",
    "ces_requests",
    "context",
    "get_variable",
    "remove_variable",
    "set_variable",
    "tool",
    "tools",
]
