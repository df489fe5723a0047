//! User-written Python tools and callbacks for the agent, run in a real sandbox.
//!
//! Users extend their agent with Python files written against the seed's runtime API
//! (`python-runtime-reference`): tools, and callbacks of the six kinds. This crate runs them in
//! CPython 3.12 compiled to a WebAssembly component (built with componentize-py from
//! `python/` and `wit/` by `scripts/build-python-sandbox`), under wasmtime, in-process: every call
//! gets a fresh interpreter instance with no files, no network and no environment, a memory cap,
//! a wall-clock deadline and bounded output ([`Sandbox`]). Inside, the seed's globals and classes
//! (`context`, `get_variable`, `tools`, `ces_requests`, `Part`, `LlmResponse`, …) are
//! implemented in `python/ces_public.py`, and cross to the host as the agent crate's JSON.
//!
//! How Python meets the engine:
//! - a [`PythonTool`] is an [`agent::AgentTool`]: its schema comes from the function's signature
//!   and docstring, its approval flag and scopes from `@tool(requires_approval=..., scopes=...)`;
//!   variable changes become the response event's `state_delta`; an exception answers `FAILED`
//!   with the traceback;
//! - a [`PythonCallback`] becomes an [`agent::Callbacks`] entry, run in the engine's order; one
//!   that fails is reported, and a failing `before_*` callback blocks its step (it is a guard:
//!   failing open would let through what it was written to stop) while a failing `after_*` one
//!   is skipped;
//! - what the code may reach outside — the agent's tools, HTTP — is the app's [`Host`]; writes
//!   pass only for a tool that needs approval (declared `requires_approval`, or in a file that
//!   may send HTTP writes), which the engine runs only once the user approved the call; the
//!   approval card shows the writes a dry run would send and the file's own preview words;
//! - [`PythonExtensions::load_dir`] loads a folder of `.py` files, and apps in Google's layout
//!   in it ([`layout`]); a file that does not load is reported with its traceback and line, and
//!   the rest load regardless.
//!
//! The component must be compiled to machine code before it runs. Installed apps ship it
//! compiled ([`precompile`], checked against the engine and the CPU when it loads); anywhere
//! else it is compiled once per machine and cached ([`cache`]): that first compile takes 10 to
//! 20 seconds on two cores, after which creating a [`Sandbox`] takes a fraction of a second. An
//! app should create its sandbox in the background at start-up.
//!
//! # Writing extensions
//!
//! Each `.py` file of the extensions folder is a module; files load in name order. An app in
//! Google's layout (a folder with `app.json`, as `cxas pull` writes it and Google's samples ship)
//! loads unchanged after them: `tools/<tool>/python_function/python_code.py` is the tool its
//! `<tool>.json` declares (name, function and description), and
//! `agents/<agent>/<kind>_callbacks/<callback>/python_code.py` is a callback of that kind, run in
//! the order the agent's JSON lists them; see [`layout`].
//!
//! - **Tools.** The function named like the file (`order_status.py` → `def order_status(...)`) is
//!   the file's tool; other functions are helpers. More tools per file, or a tool that needs more
//!   than the defaults, are declared with the `tool` decorator: `@tool(requires_approval=True,
//!   scopes=["im:message"], deduplicates=False, name=..., description=...)`. `requires_approval`
//!   makes the engine hold every call for the user's approval; a file that names
//!   `ces_requests.post/put/patch/delete/request` anywhere gets the same for all its tools, since
//!   they may write. `scopes` are the Feishu permissions it needs. A function
//!   `preview_<tool function>(same arguments)` (or `@tool(preview=fn)`) words the approval card:
//!   a one-line summary, or `{"summary": ..., "fields": {label: value}}`. A file that declares no
//!   tool and no callback is reported as such, with its plain functions named. The model sees the
//!   docstring's summary as the description and a JSON Schema built from the signature: `str`,
//!   `int`, `float`, `bool`, `list[T]`, `set[T]`, `tuple[...]`, `dict[str, T]`, `Optional[T]` and
//!   `T | None` (which admit `null`, as does any parameter whose default is `None`),
//!   `Literal[...]`; a parameter with a default is optional and carries it as `default`; `Args:`
//!   lines of the docstring describe the parameters. A parameter named `tool_context` (or typed `ToolContext`)
//!   receives the context instead of an argument. The return value (any JSON-like value, or the
//!   seed's classes) goes to the model.
//! - **Callbacks.** Functions named `before_agent_callback(callback_context)`,
//!   `after_agent_callback(callback_context)`, `before_model_callback(callback_context,
//!   llm_request)`, `after_model_callback(callback_context, llm_response)`,
//!   `before_tool_callback(tool, input, callback_context)` and `after_tool_callback(tool, input,
//!   callback_context, tool_response)`. Returning `None` lets the turn go on; returning a value
//!   short-circuits (content for the agent kinds, an `LlmResponse` for the model kinds, a dict
//!   for the tool kinds); editing `llm_response` or `tool_response` in place and returning `None`
//!   keeps the edit, as does editing `llm_request` or the tool's `input`. Tool callbacks get the
//!   tool's name and description. Callbacks only read: they can never send a write.
//! - **State.** `context.variables` (the same dict as `context.state`), `get_variable`,
//!   `set_variable` and `remove_variable`; changes become the event's `state_delta`, and are
//!   dropped when the code fails; `remove_variable` of a missing key is a `KeyError`, as `del`
//!   is. `_session` (in the variables, and as a global) holds `modality` and `channel`.
//! - **Imports.** Only these standard modules: `__future__ abc array asyncio base64 binascii
//!   bisect calendar cmath collections contextlib copy csv dataclasses datetime decimal difflib
//!   enum fractions functools hashlib heapq hmac html io itertools json logging math numbers
//!   operator pprint random re statistics string struct textwrap time traceback types typing
//!   unicodedata urllib.parse uuid zoneinfo` (with the IANA time zones built in), the read-only
//!   parts of `sys`, and `ces_public` (the runtime itself). Anything else is refused with the
//!   reason. There are no files, no network (HTTP goes through `ces_requests`, which the app
//!   answers and which takes `requests`' arguments) and no environment variables.
//! - **Answers from outside.** `tools.NAME(...)`, `async_tools` futures and `ces_requests` give
//!   the seed's `ExternalResponse` (`ok`, `status_code`, `text`, `raise_for_status()`, `json()`),
//!   which also reads as a dict of its JSON body, as Google's samples read it
//!   (`response.get("customer", {})`, `response["id"]`, `"id" in response`, `keys()`, `items()`).
//!   A body that is no JSON object (a 404's words, a list) cannot be read so: that is a
//!   `TypeError` saying what to read instead, also written to stderr, so the app reports it even
//!   when the code catches every exception.
//! - **Values.** What crosses to the app is JSON: NaN, infinities, integers past 64 bits, lone
//!   surrogates and nesting past 100 levels are the code's error, reported at its `return` line.
//! - **Limits.** Each call has a deadline (5 s by default), a memory cap (256 MiB), a bound on
//!   printed output (64 KiB) and on the return value (256 KiB of JSON; past it the value is cut
//!   and says so); `time.sleep` past the deadline stops the call at once. Calls through
//!   `tools.NAME` nest at most [`MAX_NESTING`] deep and may not take the instance slots kept for
//!   the engine's own calls. Printed output and failures are reported to the app ([`Reporter`]).
//!
//! # Where the seed leaves a choice
//!
//! The seed is followed where it is explicit, also where Google's offline re-implementation of
//! the data model (`cxas_scrapi.utils.callback_libs`) differs: a `Part` sets exactly one field
//! (two is a `ValueError`), `EventActions` flags are booleans (`False` when unset, not `None`),
//! and `Event.is_agent(name)` is false for the user's events whatever the name. Where the seed
//! is silent or ambiguous, this runtime chose:
//! - `Part.from_inline_data(data, mime_type)` takes the raw bytes (`inline_data.raw_data`), not
//!   their base64 form: the seed types `data` as `bytes` and gives `Blob` both fields; raw bytes
//!   are what code has in hand, and `Blob.data` gives the base64 form from them. (Google's
//!   library stores the argument as `Blob.data`.)
//! - `GenerateContentConfig.hide_tool(name)` twice lists the tool once: the list says which
//!   tools the model may not see. (Google's library appends it again.)
//! - `Part.from_customized_response(content=..., ...)` is a call of the engine's
//!   `customized_response` function with the options as snake-case arguments (the agent crate's
//!   `CustomizedResponse`), which the app answers; `content` is required, as in the seed's
//!   signature. (Google's library packs them as camel-case JSON in an
//!   `application/json+agentResponse` inline blob, with `content` defaulting to empty.)
//! - The answer of `tools.NAME(...)` is the seed's `ExternalResponse` and also a dict of its body
//!   (above): the seed documents the class, Google's samples read a dict, and both work.
//! - A tool's return value is the function response's `output`, as the seed says; Google's
//!   platform nests it under `result` (its tool tests read `$.result.…`).
//!
//! Imports: only `agent` (the tools and callbacks it offers the engine); nothing above it.

pub mod cache;
mod callbacks;
mod error;
mod extensions;
mod host;
pub mod layout;
mod module;
mod output;
pub mod precompile;
mod protocol;
mod report;
mod runtime;
mod tool;

pub use cache::CacheOutcome;
pub use callbacks::PythonCallback;
pub use error::{LoadError, PythonError, SandboxError, SetupError};
pub use extensions::PythonExtensions;
pub use host::{Host, HostCall, HttpRequest, NoHost, ToolsHost};
pub use layout::{Declared, DeclaredTool, Folder, SourceFile};
pub use module::{CallbackKind, PythonModule, UnknownCallback};
pub use protocol::ToolSpec;
pub use report::{Report, Reporter};
pub use runtime::{Limits, MAX_NESTING, RunOutput, Sandbox, SandboxConfig};
pub use tool::{PythonTool, ToolRun};
