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
    "__future__",
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
    "logging",
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

# Modules that work under WASI only with help, or not at all on some builds: imported if they
# can be, refused with the reason otherwise (so a build without them still works).
OPTIONAL_MODULES = ("asyncio", "zoneinfo")
_OPTIONAL_FAILED = {}
for _name in OPTIONAL_MODULES:
    try:
        __import__(_name)
    except Exception as _e:  # noqa: BLE001  (any failure means "not here", with its reason)
        _OPTIONAL_FAILED[_name] = f"{type(_e).__name__}: {_e}"

import random  # noqa: E402  (imported above; named here for reseeding)


def _sandbox_event_loop():
    """An asyncio event loop that works here: the standard one wakes itself through a socket
    pair, and there are no sockets. Nothing outside can wake this one either, so it only waits
    for timers (``asyncio.sleep``), through ``time.sleep`` (the host's, bounded by the deadline)."""
    import asyncio
    import selectors
    from asyncio import selector_events

    class NoSelector(selectors.BaseSelector):
        def register(self, fileobj, events, data=None):
            raise OSError("there are no files or sockets in the Python sandbox")

        def unregister(self, fileobj):
            raise KeyError(fileobj)

        def select(self, timeout=None):
            if timeout is None:
                raise RuntimeError(
                    "the event loop has nothing to wait for: only timers (asyncio.sleep) and "
                    "coroutines run in the sandbox"
                )
            if timeout > 0:
                time.sleep(timeout)
            return []

        def get_map(self):
            return {}

        def close(self):
            pass

    class SandboxLoop(selector_events.BaseSelectorEventLoop):
        def __init__(self):
            super().__init__(NoSelector())

        def _make_self_pipe(self):
            self._ssock = self._csock = None

        def _close_self_pipe(self):
            pass

        def _write_to_self(self):
            pass

    class Policy(asyncio.DefaultEventLoopPolicy):
        _loop_factory = SandboxLoop

    asyncio.set_event_loop_policy(Policy())


if "asyncio" not in _OPTIONAL_FAILED:
    try:
        _sandbox_event_loop()
    except Exception as _e:  # noqa: BLE001
        _OPTIONAL_FAILED["asyncio"] = f"{type(_e).__name__}: {_e}"


def _bundle_tzdata():
    """Reads the IANA time zones (the ``tzdata`` package, on the build's Python path) into the
    snapshot, and points ``zoneinfo`` at them: at run time there is no file system to read them
    from. Without ``tzdata`` at build time, ``ZoneInfo`` finds no zone and says so."""
    if "zoneinfo" in _OPTIONAL_FAILED:
        return 0
    try:
        import io as _io
        import importlib.resources as _resources
        import zoneinfo._common as _common

        import tzdata  # noqa: F401  (only its data files are used)
    except Exception:  # noqa: BLE001
        return 0
    zones = {}

    def walk(folder, prefix):
        for entry in folder.iterdir():
            name = prefix + entry.name
            if entry.is_dir():
                walk(entry, name + "/")
            elif not entry.name.startswith("_") and "." not in entry.name:
                zones[name] = entry.read_bytes()

    walk(_resources.files("tzdata").joinpath("zoneinfo"), "")

    def load_tzdata(key):
        data = zones.get(key)
        if data is None:
            raise zoneinfo.ZoneInfoNotFoundError(f"No time zone found with key {key}")
        return _io.BytesIO(data)

    import zoneinfo

    _common.load_tzdata = load_tzdata
    zoneinfo.available_timezones = lambda: set(zones)
    zoneinfo.reset_tzpath([])
    return len(zones)


_TIME_ZONES = _bundle_tzdata()

# Why the usual suspects are refused, in words a user can act on.
_REFUSED_BECAUSE = {
    "os": "there is no file system, environment or process here",
    "pathlib": "there is no file system here",
    "shutil": "there is no file system here",
    "tempfile": "there is no file system here",
    "glob": "there is no file system here",
    "io.open": "there is no file system here",
    "subprocess": "Python code cannot start programs",
    "multiprocessing": "Python code cannot start processes",
    "threading": "Python code runs on one thread; use async_tools for calls that overlap",
    "concurrent": "Python code runs on one thread; use async_tools for calls that overlap",
    "socket": "there is no network here; make HTTP calls with ces_requests",
    "ssl": "there is no network here; make HTTP calls with ces_requests",
    "http": "there is no network here; make HTTP calls with ces_requests",
    "urllib.request": "there is no network here; make HTTP calls with ces_requests",
    "requests": "use ces_requests, which takes the same arguments as requests",
    "httpx": "use ces_requests, which takes the same arguments as requests",
    "ctypes": "native code cannot be loaded",
    "importlib": "modules cannot be loaded at run time; only the listed ones are there",
}


def _sys_view():
    """The parts of ``sys`` that only describe the interpreter: reading them is harmless, while
    ``sys.modules``, ``sys.path`` or ``sys.settrace`` would let code reach the runtime itself."""
    view = types.ModuleType("sys", "The read-only parts of sys: version, platform, limits, stdout and stderr.")
    for attr in (
        "byteorder", "exc_info", "exception", "exit", "float_info", "float_repr_style",
        "getdefaultencoding", "getrecursionlimit", "getsizeof", "hash_info", "hexversion",
        "implementation", "int_info", "intern", "maxsize", "maxunicode", "platform", "stderr",
        "stdout", "version", "version_info", "get_int_max_str_digits",
    ):
        if hasattr(sys, attr):
            setattr(view, attr, getattr(sys, attr))
    view.argv = []
    return view


_SYS_VIEW = _sys_view()

_real_import = builtins.__import__
_ALLOWED = frozenset(ALLOWED_MODULES) | frozenset(
    name for name in OPTIONAL_MODULES if name not in _OPTIONAL_FAILED
)


def _refusal(name):
    top = name.split(".")[0]
    if name in _OPTIONAL_FAILED:
        why = f"it does not work in this build of the sandbox ({_OPTIONAL_FAILED[name]})"
    else:
        why = _REFUSED_BECAUSE.get(name) or _REFUSED_BECAUSE.get(top) or "it is not part of the sandbox"
    allowed = sorted(_ALLOWED | {"sys"})
    return (
        f"import of {name!r} is not allowed in the Python sandbox: {why}. "
        f"Available modules: {', '.join(allowed)}"
    )


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level != 0:
        raise ImportError("relative imports are not available in the Python sandbox: each file stands alone")
    if name == "sys":
        return _SYS_VIEW
    allowed = name in _ALLOWED or (
        fromlist and all(f"{name}.{item}" in _ALLOWED for item in fromlist)
    )
    if not allowed:
        raise ImportError(_refusal(name), name=name)
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
    # A file of Google's layout is named by its path in the folder (``tools/x/python_function/
    # python_code.py``); its module is ``python_code``, as Google's runtime and tests import it.
    base = filename.rsplit("/", 1)[-1]
    module_name = base[:-3] if base.endswith(".py") else base
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


_NONE_TYPE = type(None)


def _nullable(schema):
    """``schema`` or null, the way JSON Schema (and the model providers) read it."""
    if not schema:
        return schema  # unconstrained already admits null
    if "enum" in schema:
        if None not in schema["enum"]:
            schema = dict(schema, enum=schema["enum"] + [None])
            if isinstance(schema.get("type"), str):
                schema["type"] = [schema["type"], "null"]
        return schema
    if "anyOf" in schema:
        if {"type": "null"} not in schema["anyOf"]:
            schema = dict(schema, anyOf=schema["anyOf"] + [{"type": "null"}])
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


def _schema_for(hint):
    if hint is inspect.Parameter.empty or hint is typing.Any:
        return {}
    if hint is None or hint is _NONE_TYPE:
        return {"type": "null"}
    if hint in _SIMPLE_TYPES:
        return dict(_SIMPLE_TYPES[hint])
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in args if a is not _NONE_TYPE]
        if len(options) == 1:
            schema = _schema_for(options[0])
        else:
            schema = {"anyOf": [_schema_for(a) for a in options]}
        return _nullable(schema) if len(options) < len(args) else schema
    if origin is typing.Literal:
        values = list(args)
        schema = {"enum": values}
        kinds = {type(a) for a in values if a is not None}
        if len(kinds) == 1 and next(iter(kinds)) in _SIMPLE_TYPES:
            kind = _SIMPLE_TYPES[next(iter(kinds))]["type"]
            schema["type"] = [kind, "null"] if None in values else kind
        return schema
    if origin in (list, set, frozenset, tuple) or (
        isinstance(origin, type) and issubclass(origin, (list, tuple, set, frozenset))
    ):
        schema = {"type": "array"}
        if origin is tuple and args and args[-1] is not Ellipsis:
            # tuple[int, str]: a fixed sequence of these.
            schema["prefixItems"] = [_schema_for(a) for a in args]
            schema["minItems"] = schema["maxItems"] = len(args)
        elif args and args[0] is not typing.Any:
            item = _schema_for(args[0])
            if item:
                schema["items"] = item
        if origin in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin is dict or (isinstance(origin, type) and issubclass(origin, dict)):
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not typing.Any:
            value = _schema_for(args[1])
            if value:
                schema["additionalProperties"] = value
        return schema
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
        if param.default is None:
            # `x: str = None` takes null as surely as `x: Optional[str] = None` does: the
            # function was written to receive None.
            schema = _nullable(schema)
        schema = dict(schema)
        if param.name in described and described[param.name]:
            schema["description"] = described[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        else:
            try:
                schema["default"] = ces_public._jsonable(param.default)
            except (TypeError, ValueError):
                pass  # a default with no JSON form is still the function's default
        properties[param.name] = schema
    parameters = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    if not extra:
        parameters["additionalProperties"] = False
    description = config.get("description") or summary
    preview = config.get("preview")
    if preview is None and callable(fn.__globals__.get(f"preview_{fn.__name__}")):
        preview = f"preview_{fn.__name__}"
    return {
        "preview": preview,
        "name": config.get("name") or fn.__name__,
        "function": fn.__name__,
        "description": description,
        "parameters": parameters,
        "requires_approval": config.get("requires_approval", False),
        "scopes": config.get("scopes", []),
        "deduplicates": config.get("deduplicates", False),
    }


_WRITE_METHODS = frozenset(("post", "put", "patch", "delete", "request"))


def _names_in(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_in(const)
    return names


def _may_write(code):
    """Whether the file may send HTTP writes: it names ``ces_requests`` and a writing method
    anywhere. Read from the bytecode, so helpers count; such a file's tools wait for approval
    like any write, and their card shows the requests a dry run would send."""
    names = _names_in(code)
    return "ces_requests" in names and bool(names & _WRITE_METHODS)


def _own_function(ns, name, filename):
    """``ns[name]`` if it is a function written in this file (not the runtime's, nor imported)."""
    value = ns.get(name)
    if isinstance(value, types.FunctionType) and value.__code__.co_filename == filename:
        return value
    return None


def _declared_tools(req, ns, filename):
    """Tools the file's folder declares (Google's ``<tool>.json`` beside ``python_function/``),
    by the function's name: ``{function: {"name": ..., "description": ...}}``."""
    declared = {}
    for decl in req.get("tools") or ():
        function = decl["function"]
        if _own_function(ns, function, filename) is None:
            where = decl.get("declared_in") or "its declaration"
            raise UserCodeError(
                f"{where} names the function {function!r} as the tool {decl['name']!r}, "
                f"but {filename} defines no function {function!r}"
            )
        declared[function] = {"name": decl["name"], "description": decl.get("description")}
    return declared


def _describe(req):
    filename = req["filename"]
    code = compile(req["source"], filename, "exec")
    ns = _load(filename, req["source"], ces_public.ToolContext(), base64.b64encode(marshal.dumps(code)))
    module_name = ns["__name__"]
    # A file whose folder declares its tools or callbacks (Google's layout) has exactly those;
    # one that stands alone is read for the function named like it and ``@tool``.
    declared = _declared_tools(req, ns, filename) if "tools" in req else None
    kinds = req.get("callbacks")
    found = []
    plain = []
    may_write = _may_write(code)
    previews = {
        getattr(v, "__companion_tool__", {}).get("preview") for v in ns.values()
    } | {name for name in ns if name.startswith("preview_")}
    for name, value in list(ns.items()):
        # Only functions written in this file: not the runtime's, nor imported ones.
        if _own_function(ns, name, filename) is None:
            continue
        config = getattr(value, "__companion_tool__", None)
        if declared is not None and name in declared:
            config = dict(config or {}, **declared[name])
        elif config is None and declared is None and name == module_name and name not in CALLBACK_KINDS:
            config = {}
        if config is not None:
            declaration = _declaration(value, config)
            declaration["may_write"] = may_write
            found.append(declaration)
        elif name not in CALLBACK_KINDS and not name.startswith("_") and name not in previews:
            plain.append(name)
    callbacks = [
        name
        for name in CALLBACK_KINDS
        if _own_function(ns, name, filename) is not None and (kinds is None or name in kinds)
    ]
    if kinds and not callbacks:
        raise UserCodeError(
            f"{filename} is in a folder of {' or '.join(kinds)}s but defines no function "
            f"named {' or '.join(kinds)}"
        )
    return {
        "tools": found,
        "callbacks": callbacks,
        # Functions that are neither: helpers, or tools the user forgot to mark, which the app
        # names when the file declares nothing.
        "functions": plain,
        "code": base64.b64encode(marshal.dumps(code)).decode("ascii"),
    }


# --------------------------------------------------------------------------------------------
# Calling a tool or a callback


def _context(req, tool=False):
    c = req.get("context") or {}
    state = dict(c.get("state") or {})
    # The seed reads the channel and modality from the variables (`context.variables
    # .get('_session', {})`): they are there for every call, whether or not the session stored them.
    state["_session"] = _session_of(state)
    fields = dict(
        invocation_id=c.get("invocation_id", ""),
        agent_name=c.get("agent_name", ""),
        session_id=c.get("session_id", ""),
        state=state,
        user_content=(
            ces_public.Content._from_json(c["user_content"]) if c.get("user_content") else None
        ),
    )
    if tool:
        return ces_public.ToolContext(function_call_id=c.get("function_call_id", ""), **fields)
    return ces_public.CallbackContext(**fields)


def _run(value):
    """The result of calling user code; an ``async def`` is run to completion on the sandbox's
    event loop (or, without asyncio, driven by hand: it may then only await coroutines)."""
    if inspect.iscoroutine(value) and "asyncio" not in _OPTIONAL_FAILED:
        import asyncio

        return asyncio.run(value)
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


def _state_delta(before, ctx, stored_session=True):
    """What the code changed in the variables, as an event's state_delta (null = removed).
    ``stored_session`` says whether ``_session`` came from the session or was filled in here."""
    after = ctx.variables
    if not isinstance(after, dict):
        raise UserCodeError("context.variables must stay a dict")
    delta = {}
    for key, value in after.items():
        encoded = ces_public._jsonable(value, f"variable {key!r}")
        if key not in before or before[key] != json.dumps(encoded, sort_keys=True):
            delta[key] = encoded
    for key in before:
        if key not in after and not (key == "_session" and not stored_session):
            delta[key] = None
    return delta


def _returned_line(fn):
    """Starts watching where ``fn`` returns, so that a return value with no JSON form can be
    blamed on its ``return`` line. Only this one function's code is watched (sys.monitoring's
    local events), so the cost is one callback per return of it."""
    code = getattr(fn, "__code__", None)
    seen = {"code": code} if code is not None else {}
    if code is None or not hasattr(sys, "monitoring"):
        return seen
    mon = sys.monitoring
    try:
        if mon.get_tool(_MONITOR) is None:
            mon.use_tool_id(_MONITOR, "companion")

        def on_return(c, offset, value):
            if c is code:
                seen["offset"] = offset
            return None

        mon.register_callback(_MONITOR, mon.events.PY_RETURN, on_return)
        mon.set_local_events(_MONITOR, code, mon.events.PY_RETURN)
    except Exception:  # noqa: BLE001  (only a better error message is lost)
        pass
    return seen


_MONITOR = 4  # a tool id of sys.monitoring that debuggers and profilers do not use


def _line_of(seen):
    code = seen.get("code")
    offset = seen.get("offset")
    if code is None:
        return None
    if offset is not None:
        for start, end, line in code.co_lines():
            if start <= offset < end and line is not None:
                return line
    return code.co_firstlineno


def _converted(value, what, fn, seen):
    """``value`` as JSON data; a value with none is the user's error, at their return line."""
    try:
        return ces_public._jsonable(value, what)
    except (TypeError, ValueError, RecursionError) as e:
        if isinstance(e, RecursionError):
            err = ValueError(f"{what}: nested too deeply to send")
        else:
            err = type(e)(str(e))
        err.user_line = _line_of(seen)
        err.user_function = getattr(fn, "__name__", None)
        raise err from None


def _call(req):
    kind = req["kind"]
    is_tool = kind in ("tool", "preview") or kind.endswith("_tool_callback")
    ctx = _context(req, tool=is_tool)
    stored_session = "_session" in ((req.get("context") or {}).get("state") or {})
    before = {k: json.dumps(v, sort_keys=True) for k, v in ctx.variables.items()}
    ns = _load(req["filename"], req["source"], ctx, req.get("code"))
    fn = ns.get(req["function"])
    if not callable(fn):
        raise UserCodeError(f"{req['filename']} defines no function {req['function']!r}")
    seen = _returned_line(fn)
    answer = {}
    try:
        if kind in ("tool", "preview"):
            answer = _call_tool(fn, req, ctx, seen)
        else:
            answer = _call_callback_kind(fn, kind, req, ctx, seen)
    finally:
        # Calls started with async_tools and never polled still happen, as the code meant them
        # to; they finish before the call returns (within its deadline).
        ces_public._drain()
    answer["state_delta"] = _state_delta(before, ctx, stored_session)
    answer["ok"] = True
    return answer


def _call_tool(fn, req, ctx, seen):
    answer = {}
    kwargs = dict(req.get("args") or {})
    for name in _context_params(fn):
        kwargs[name] = ctx
    value = _run(fn(**kwargs))
    answer["value"] = _converted(value, "the tool's return value", fn, seen)
    actions = ctx.actions._to_json()
    actions.pop("state_delta", None)
    # Changes written straight into actions.state_delta count like any other.
    for key, val in (ctx.actions.state_delta or {}).items():
        ctx.variables[key] = val
    if actions:
        answer["actions"] = actions
    return answer


def _call_callback_kind(fn, kind, req, ctx, seen):
    answer = {}
    values = {"context": ctx}
    if kind == "before_model_callback":
        values["llm_request"] = ces_public.LlmRequest._from_json(req["llm_request"])
    if kind == "after_model_callback":
        values["llm_response"] = ces_public.LlmResponse._from_json(req["llm_response"])
    is_tool = kind.endswith("_tool_callback")
    if is_tool:
        values["tool"] = ces_public.Tool._from_json(req["tool"])
        values["args"] = dict(req.get("tool_args") or {})
        # A copy: the callback may edit it in place, and the edit is compared with the original.
        values["tool_response"] = json.loads(json.dumps(req.get("tool_response")))
    value = _call_callback(fn, kind, values)
    if value is not None:
        if kind in ("before_agent_callback", "after_agent_callback"):
            value = ces_public._content(value, "model")._to_json()
        elif kind in ("before_model_callback", "after_model_callback"):
            if not isinstance(value, ces_public.LlmResponse):
                value = ces_public.LlmResponse(content=ces_public._content(value, "model"))
            value = value._to_json()
        else:
            value = _converted(value, f"the {kind}'s return value", fn, seen)
    elif kind == "after_model_callback":
        # Editing the response in place and returning None keeps the edit, as in the
        # reference's lineage (ADK): the edited response replaces the model's.
        edited = values["llm_response"]._to_json()
        if edited != req["llm_response"]:
            value = edited
    elif kind == "after_tool_callback":
        edited = _converted(values["tool_response"], "the edited tool_response", fn, seen)
        if edited != req.get("tool_response"):
            value = edited
    answer["value"] = value
    if kind == "before_model_callback":
        edited = values["llm_request"]._to_json()
        if edited != req["llm_request"]:
            answer["llm_request"] = edited
    if kind == "before_tool_callback" and values["args"] != req.get("tool_args"):
        answer["tool_args"] = _converted(values["args"], "the tool arguments", fn, seen)
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
    user_line = getattr(e, "user_line", None)
    try:
        if user_line is not None:
            # Raised by the runtime about the user's value: the traceback would show only the
            # runtime, so it points at the line that returned the value instead.
            line = user_line
            function = getattr(e, "user_function", None) or "<module>"
            text = (
                "Traceback (most recent call last):\n"
                f'  File "{filename}", line {line}, in {function}\n'
                f"    {linecache.getline(filename, line).strip()}\n"
                f"{type(e).__name__}: {e}\n"
            )
        else:
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
        return _encode(answer, filename)


def _encode(answer, filename):
    """The answer as JSON text the host can take: valid UTF-8, no NaN. A lone surrogate in a
    string (which UTF-8 cannot carry) fails the call with a clear error when the code returned it,
    and is escaped when it is only part of an error message, so the traceback survives."""
    try:
        text = json.dumps(answer, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError as e:
        if answer.get("ok"):
            bad = e.object[e.start:e.end].encode("utf-8", "backslashreplace").decode("ascii")
            err = UserCodeError(
                f"the return value holds {bad!r}, a lone surrogate, which is not valid Unicode "
                "and cannot be sent; build strings from whole characters (or encode bytes with base64)"
            )
            answer = _error(err, filename)
    except BaseException as e:  # noqa: BLE001
        answer = _error(e, filename)
    text = json.dumps(answer, ensure_ascii=False, allow_nan=False, default=str)
    # "replace", not "backslashreplace": an escaped surrogate would be read back as one.
    return text.encode("utf-8", "replace").decode("utf-8")
