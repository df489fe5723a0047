"""The component's entry point: runs user-written Python tools and callbacks for the host.

componentize-py runs this module's top level once, at build time, and snapshots the interpreter's
memory; every call then starts from that snapshot in a fresh instance. So everything user code may
import is imported here, and nothing else can be: the component has no file system to load more
from. The host calls ``invoke`` with a JSON request and gets a JSON answer; see
``crates/pysandbox/src/protocol.rs`` for both shapes.
"""

import base64
import builtins
import inspect
import json
import linecache
import marshal
import re
import sys
import time
import traceback
import types
import typing

import wit_world
from wit_world.imports import host

import ces_public

# The standard library user code may import. Each is imported now so that it is in the snapshot;
# the import guard below refuses everything else with a clear message. (The guard is for clear
# errors, not security: the sandbox's walls are WebAssembly and WASI, which give no files, no
# network and no environment whatever Python code does.)
ALLOWED_MODULES = (
    "abc",
    "array",
    "base64",
    "binascii",
    "bisect",
    "calendar",
    "ces_public",
    "cmath",
    "collections",
    "collections.abc",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "io",
    "itertools",
    "json",
    "math",
    "numbers",
    "operator",
    "pprint",
    "random",
    "re",
    "statistics",
    "string",
    "struct",
    "textwrap",
    "time",
    "traceback",
    "types",
    "typing",
    "unicodedata",
    "urllib.parse",
    "uuid",
)
for _name in ALLOWED_MODULES:
    __import__(_name)

import random  # noqa: E402  (imported above; named here for reseeding)

_real_import = builtins.__import__
_ALLOWED = frozenset(ALLOWED_MODULES)


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level != 0:
        raise ImportError("relative imports are not available in the Python sandbox")
    allowed = name in _ALLOWED or (
        fromlist and all(f"{name}.{item}" in _ALLOWED for item in fromlist)
    )
    if not allowed:
        raise ImportError(
            f"import of {name!r} is not allowed in the Python sandbox; "
            f"allowed modules: {', '.join(ALLOWED_MODULES)}",
            name=name,
        )
    return _real_import(name, globals, locals, fromlist, level)


_SANDBOX_BUILTINS = dict(builtins.__dict__)
_SANDBOX_BUILTINS["__import__"] = _guarded_import


def _sleep(seconds):
    """time.sleep through the host, which stops the call if the sleep would pass its deadline."""
    seconds = float(seconds)
    if seconds != seconds:  # NaN
        raise ValueError("Invalid value NaN (not a number)")
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    host.sleep(seconds)


time.sleep = _sleep
ces_public._bind_host(host)

CALLBACK_KINDS = (
    "before_agent_callback",
    "after_agent_callback",
    "before_model_callback",
    "after_model_callback",
    "before_tool_callback",
    "after_tool_callback",
)

# --------------------------------------------------------------------------------------------
# Loading a user's file


class UserCodeError(Exception):
    """A problem with the user's code that is not a Python exception of its own."""


def _session_of(state):
    session = state.get("_session")
    session = dict(session) if isinstance(session, dict) else {}
    session.setdefault("modality", "TEXT")
    session.setdefault("channel", "API")
    return session


def _load(filename, source, ctx, code=None):
    """Runs the file's top level in a fresh namespace holding the runtime's globals. ``code`` is
    the file's bytecode from an earlier ``describe`` (marshalled, base64): compiling the source
    again on every call would cost more than the rest of a small tool's call."""
    # Tracebacks read source lines through linecache; there is no file to read them from.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module_name = filename[:-3] if filename.endswith(".py") else filename
    ns = {"__name__": module_name, "__file__": filename, "__builtins__": _SANDBOX_BUILTINS}
    for name in ces_public.__all__:
        ns[name] = getattr(ces_public, name)
    ns["ces_public"] = ces_public
    ns["context"] = ctx
    ns["_session"] = _session_of(ctx.variables)
    ces_public.context = ctx
    if code is None:
        code = compile(source, filename, "exec")
    else:
        code = marshal.loads(base64.b64decode(code))
    exec(code, ns)
    return ns


# --------------------------------------------------------------------------------------------
# Describing a file: its tools (with JSON schemas) and callbacks

_SIMPLE_TYPES = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    list: {"type": "array"},
    tuple: {"type": "array"},
    set: {"type": "array"},
    dict: {"type": "object"},
}

_SECTION = ("args:", "arguments:", "parameters:", "params:", "returns:", "return:", "raises:",
            "yields:", "examples:", "example:", "note:", "notes:")


def _schema_for(hint):
    if hint is inspect.Parameter.empty or hint is typing.Any or hint is None:
        return {}
    if hint in _SIMPLE_TYPES:
        return dict(_SIMPLE_TYPES[hint])
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _schema_for(options[0])
        return {"anyOf": [_schema_for(a) for a in options]}
    if origin is typing.Literal:
        schema = {"enum": list(args)}
        kinds = {type(a) for a in args}
        if len(kinds) == 1 and next(iter(kinds)) in _SIMPLE_TYPES:
            schema.update(_SIMPLE_TYPES[next(iter(kinds))])
        return schema
    if origin in (list, set, frozenset, tuple) or (
        isinstance(origin, type) and issubclass(origin, (list, tuple, set))
    ):
        schema = {"type": "array"}
        if args and origin is not tuple and args[0] is not typing.Any:
            schema["items"] = _schema_for(args[0])
        return schema
    if origin is dict or (isinstance(origin, type) and issubclass(origin, dict)):
        return {"type": "object"}
    # Anything else (a class of the user's, say) is not constrained: the function checks it.
    return {}


_ARG_LINE = re.compile(r"^(\s*)([A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ARG_SECTIONS = ("args", "arguments", "parameters", "params")


def _parse_docstring(doc):
    """The summary (the text before the first section) and the per-argument descriptions of a
    Google-style docstring (``Args:`` then ``name: text`` or ``name (type): text`` lines)."""
    summary = []
    params = {}
    section = None
    current = None
    entry_indent = None
    for line in (doc or "").splitlines():
        stripped = line.strip()
        if stripped.lower() in _SECTION:
            section = stripped.lower().rstrip(":")
            current = None
            entry_indent = None
            continue
        if section is None:
            summary.append(line)
        elif section in _ARG_SECTIONS and stripped:
            match = _ARG_LINE.match(line)
            if match and (entry_indent is None or _indent(line) <= entry_indent):
                entry_indent = _indent(line)
                current = match.group(2)
                params[current] = match.group(3).strip()
            elif current is not None:
                params[current] = (params[current] + " " + stripped).strip()
    return "\n".join(summary).strip(), params


def _indent(line):
    return len(line) - len(line.lstrip())


_CONTEXT_NAMES = ("tool_context", "callback_context")
_CONTEXT_HINTS = ("ToolContext", "CallbackContext")


def _context_params(fn):
    """The parameters that take the context rather than an argument, read from the code object:
    ``inspect.signature`` would cost as much as a small tool's whole call."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    hints = getattr(fn, "__annotations__", {}) or {}
    found = []
    for name in names:
        hint = hints.get(name)
        if name in _CONTEXT_NAMES or hint in _CONTEXT_HINTS or (
            isinstance(hint, type) and issubclass(hint, ces_public.CallbackContext)
        ):
            found.append(name)
    return found


def _declaration(fn, config):
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # an unresolvable string annotation
        raise UserCodeError(f"{fn.__name__}: cannot read the type hints: {e}") from e
    summary, described = _parse_docstring(inspect.getdoc(fn))
    context_params = _context_params(fn)
    properties = {}
    required = []
    extra = False
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra = True
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise UserCodeError(
                f"{fn.__name__}: parameter {param.name!r} cannot be passed by name; "
                "tools take their arguments by name"
            )
        if param.name in context_params:
            continue
        schema = _schema_for(hints.get(param.name, param.annotation))
        if param.name in described and described[param.name]:
            schema["description"] = described[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        elif param.default is not None:
            try:
                schema["default"] = ces_public._jsonable(param.default)
            except TypeError:
                pass
        properties[param.name] = schema
    parameters = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    if not extra:
        parameters["additionalProperties"] = False
    description = config.get("description") or summary
    return {
        "name": config.get("name") or fn.__name__,
        "function": fn.__name__,
        "description": description,
        "parameters": parameters,
        "requires_approval": config.get("requires_approval", False),
        "scopes": config.get("scopes", []),
        "deduplicates": config.get("deduplicates", False),
    }


def _describe(req):
    filename = req["filename"]
    code = compile(req["source"], filename, "exec")
    ns = _load(filename, req["source"], ces_public.ToolContext(), base64.b64encode(marshal.dumps(code)))
    module_name = ns["__name__"]
    found = []
    for name, value in list(ns.items()):
        # Only functions written in this file: not the runtime's, nor imported ones.
        if not isinstance(value, types.FunctionType) or value.__code__.co_filename != filename:
            continue
        config = getattr(value, "__companion_tool__", None)
        if config is None and name == module_name and name not in CALLBACK_KINDS:
            config = {}
        if config is not None:
            found.append(_declaration(value, config))
    callbacks = [
        name
        for name in CALLBACK_KINDS
        if isinstance(ns.get(name), types.FunctionType)
        and ns[name].__code__.co_filename == filename
    ]
    return {
        "tools": found,
        "callbacks": callbacks,
        "code": base64.b64encode(marshal.dumps(code)).decode("ascii"),
    }


# --------------------------------------------------------------------------------------------
# Calling a tool or a callback


def _context(req, tool=False):
    c = req.get("context") or {}
    fields = dict(
        invocation_id=c.get("invocation_id", ""),
        agent_name=c.get("agent_name", ""),
        session_id=c.get("session_id", ""),
        state=dict(c.get("state") or {}),
        user_content=(
            ces_public.Content._from_json(c["user_content"]) if c.get("user_content") else None
        ),
    )
    if tool:
        return ces_public.ToolContext(function_call_id=c.get("function_call_id", ""), **fields)
    return ces_public.CallbackContext(**fields)


def _run(value):
    """The result of calling user code; an ``async def`` is driven to completion (it may only
    await other coroutines: there is no event loop to wait on)."""
    if inspect.iscoroutine(value):
        try:
            while True:
                value.send(None)
        except StopIteration as done:
            return done.value
        finally:
            value.close()
    return value


# Names by which callback parameters are recognised; unrecognised ones are passed by position,
# in the seed's order.
_ALIASES = {
    "context": ("callback_context", "tool_context", "context", "ctx"),
    "llm_request": ("llm_request", "request"),
    "llm_response": ("llm_response", "response"),
    "tool": ("tool",),
    "args": ("input", "args", "tool_args"),
    "tool_response": ("tool_response", "response", "result"),
}

_ORDER = {
    "before_agent_callback": ("context",),
    "after_agent_callback": ("context",),
    "before_model_callback": ("context", "llm_request"),
    "after_model_callback": ("context", "llm_response"),
    "before_tool_callback": ("tool", "args", "context"),
    "after_tool_callback": ("tool", "args", "context", "tool_response"),
}


def _call_callback(fn, kind, values):
    order = _ORDER[kind]
    params = [
        p for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    by_name = {}
    for p in params:
        for role in order:
            if p.name in _ALIASES[role] and role not in by_name.values():
                by_name[p.name] = role
                break
    if len(by_name) == len(params) and all(p.kind is not p.POSITIONAL_ONLY for p in params):
        return _run(fn(**{name: values[role] for name, role in by_name.items()}))
    return _run(fn(*[values[role] for role in order[: len(params)]]))


def _state_delta(before, ctx):
    """What the code changed in the variables, as an event's state_delta (null = removed)."""
    after = ctx.variables
    if not isinstance(after, dict):
        raise UserCodeError("context.variables must stay a dict")
    delta = {}
    for key, value in after.items():
        encoded = ces_public._jsonable(value, f"variable {key!r}")
        if key not in before or before[key] != json.dumps(encoded, sort_keys=True):
            delta[key] = encoded
    for key in before:
        if key not in after:
            delta[key] = None
    return delta


def _call(req):
    kind = req["kind"]
    is_tool = kind == "tool" or kind.endswith("_tool_callback")
    ctx = _context(req, tool=is_tool)
    before = {k: json.dumps(v, sort_keys=True) for k, v in ctx.variables.items()}
    ns = _load(req["filename"], req["source"], ctx, req.get("code"))
    fn = ns.get(req["function"])
    if not callable(fn):
        raise UserCodeError(f"{req['filename']} defines no function {req['function']!r}")
    answer = {}
    if kind == "tool":
        kwargs = dict(req.get("args") or {})
        for name in _context_params(fn):
            kwargs[name] = ctx
        value = _run(fn(**kwargs))
        answer["value"] = ces_public._jsonable(value, "the tool's return value")
        actions = ctx.actions._to_json()
        actions.pop("state_delta", None)
        # Changes written straight into actions.state_delta count like any other.
        for key, val in (ctx.actions.state_delta or {}).items():
            ctx.variables[key] = val
        if actions:
            answer["actions"] = actions
    else:
        values = {"context": ctx}
        if kind == "before_model_callback":
            values["llm_request"] = ces_public.LlmRequest._from_json(req["llm_request"])
        if kind == "after_model_callback":
            values["llm_response"] = ces_public.LlmResponse._from_json(req["llm_response"])
        if is_tool:
            values["tool"] = ces_public.Tool._from_json(req["tool"])
            values["args"] = dict(req.get("tool_args") or {})
            values["tool_response"] = req.get("tool_response")
        value = _call_callback(fn, kind, values)
        if value is not None:
            if kind in ("before_agent_callback", "after_agent_callback"):
                value = ces_public._content(value, "model")._to_json()
            elif kind in ("before_model_callback", "after_model_callback"):
                if not isinstance(value, ces_public.LlmResponse):
                    value = ces_public.LlmResponse(content=ces_public._content(value, "model"))
                value = value._to_json()
            else:
                value = ces_public._jsonable(value, f"the {kind}'s return value")
        answer["value"] = value
        if kind == "before_model_callback":
            edited = values["llm_request"]._to_json()
            if edited != req["llm_request"]:
                answer["llm_request"] = edited
        if kind == "before_tool_callback" and values["args"] != req.get("tool_args"):
            answer["tool_args"] = ces_public._jsonable(values["args"], "the tool arguments")
    answer["state_delta"] = _state_delta(before, ctx)
    answer["ok"] = True
    return answer


# --------------------------------------------------------------------------------------------
# Errors


def _user_frames(tb_exc):
    # The runtime's own frames (this module) say nothing to the user; their code's frames do.
    tb_exc.stack = traceback.StackSummary.from_list(
        [f for f in tb_exc.stack if f.filename != __file__]
    )
    for chained in (tb_exc.__cause__, tb_exc.__context__):
        if chained is not None:
            _user_frames(chained)


def _error(e, filename):
    line = None
    if isinstance(e, SyntaxError) and e.filename == filename:
        line = e.lineno
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    try:
        tb_exc = traceback.TracebackException.from_exception(e)
        _user_frames(tb_exc)
        text = "".join(tb_exc.format())
    except BaseException:  # formatting can fail too, after a MemoryError say
        text = f"{type(e).__name__}: {e}"
    try:
        message = str(e)
    except BaseException:
        message = ""
    return {
        "ok": False,
        "error": {
            "type": type(e).__name__,
            "message": message,
            "traceback": text,
            "filename": filename,
            "line": line,
        },
    }


class WitWorld(wit_world.WitWorld):
    def invoke(self, request: str) -> str:
        filename = "<request>"
        try:
            req = json.loads(request)
            filename = req.get("filename", filename)
            # The snapshot froze one generator state; without this every call would draw the
            # same "random" numbers.
            random.seed()
            if req["op"] == "describe":
                answer = {"ok": True, "value": _describe(req)}
            else:
                answer = _call(req)
        except BaseException as e:  # SystemExit and KeyboardInterrupt are user errors here too
            answer = _error(e, filename)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:
                pass
        try:
            return json.dumps(answer, ensure_ascii=False)
        except BaseException as e:
            return json.dumps(_error(e, filename), ensure_ascii=False)
