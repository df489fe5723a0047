//! Hostile code, each case in its own test: it runs as a Python tool in a real engine turn, ends
//! within its deadline with a clear error the model is shown (`FAILED`), and the engine goes on:
//! the turn completes, and the next turn's Python tool works.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::InvocationStatus;
use common::{DEADLINE, call, engine_with, say};
use serde_json::json;

/// How much later than the deadline a call may end: the epoch tick, instantiation, and a
/// loaded two-core CI machine.
const SLACK: Duration = Duration::from_millis(1500);

/// Runs `body` as the tool `hostile` and returns the error text the model saw, after checking
/// that the turn ended in time and that the engine still runs Python tools afterwards.
async fn contain(body: &str) -> String {
    contain_timed(body).await.0
}

/// [`contain`], with how long the hostile turn took.
async fn contain_timed(body: &str) -> (String, Duration) {
    let mut source = String::from("import time\n\ndef hostile() -> str:\n");
    for line in body.lines() {
        source.push_str("    ");
        source.push_str(line);
        source.push('\n');
    }
    source.push_str("    return 'survived'\n");
    let h = engine_with(
        &[
            ("hostile.py", &source),
            (
                "fine.py",
                "def fine() -> str:\n    return 'still working'\n",
            ),
        ],
        vec![
            call("hostile", json!({})),
            say("That did not work."),
            call("fine", json!({})),
            say("Fine now."),
        ],
        Arc::new(pysandbox::NoHost),
        json!({}),
    )
    .await;
    assert!(h.extensions.errors.is_empty(), "{:?}", h.extensions.errors);

    let started = Instant::now();
    let outcome = h.send("run the hostile tool").await;
    let took = started.elapsed();
    assert_eq!(outcome.status, InvocationStatus::Completed);
    assert!(took < DEADLINE + SLACK, "the turn took {took:?}");
    let responses = h.last_responses();
    assert_eq!(responses.len(), 1, "{responses:?}");
    assert_eq!(responses[0]["outcome"], "failed", "{responses:?}");
    let error = responses[0]["error"].as_str().unwrap().to_owned();
    eprintln!("{took:?}: {error}");
    assert!(
        error.starts_with("The Python tool hostile failed."),
        "{error}"
    );
    let reports = h.reports.all();
    assert!(
        reports
            .iter()
            .any(|r| r.error.is_some() && r.function == "tool hostile"),
        "the failure is reported to the app: {reports:?}"
    );

    // The engine carries on: the next turn runs another Python tool.
    assert_eq!(h.send("and now?").await.status, InvocationStatus::Completed);
    assert_eq!(
        h.last_responses(),
        vec![common::obj(json!({"output": "still working"}))]
    );
    (error, took)
}

#[tokio::test]
async fn an_endless_loop_is_stopped_at_the_deadline() {
    let error = contain("while True:\n    pass").await;
    assert!(error.contains("ran past its 2 s deadline"), "{error}");
}

#[tokio::test]
async fn a_loop_catching_base_exception_is_stopped_all_the_same() {
    let error = contain(
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass",
    )
    .await;
    assert!(error.contains("ran past its 2 s deadline"), "{error}");
}

#[tokio::test]
async fn a_huge_sum_inside_c_code_is_stopped_at_the_deadline() {
    let error = contain("return str(sum(range(10**11)))").await;
    assert!(error.contains("ran past its 2 s deadline"), "{error}");
}

#[tokio::test]
async fn a_long_sleep_is_refused_at_once() {
    let (error, took) = contain_timed("time.sleep(60)").await;
    assert!(error.contains("time.sleep(60) would outlast it"), "{error}");
    assert!(took < DEADLINE / 2, "the sleep was waited for: {took:?}");
}

#[tokio::test]
async fn a_slowly_growing_list_ends_with_a_memory_error() {
    // bytearray, not `' ' * 4096`: CPython folds that into one constant string, so the list
    // would only grow by a pointer per item and take tens of seconds to fill memory.
    let error = contain("grown = []\nwhile True:\n    grown.append(bytearray(4096))").await;
    assert!(
        error.contains("MemoryError") || error.contains("memory limit"),
        "{error}"
    );
}

#[tokio::test]
async fn a_one_gib_allocation_is_a_memory_error() {
    let error = contain("block = bytearray(1024 * 1024 * 1024)").await;
    assert!(error.contains("MemoryError"), "{error}");
    assert!(
        error.contains("line 4"),
        "the traceback names the line: {error}"
    );
}

#[tokio::test]
async fn the_file_system_is_not_there() {
    let error = contain("return open('/etc/passwd').read()").await;
    assert!(error.contains("/etc/passwd"), "{error}");
    assert!(
        error.contains("FileNotFoundError") || error.contains("PermissionError"),
        "{error}"
    );
    assert!(!error.contains("root:"), "{error}");
    // Nor through the os module, reached around the import guard.
    let error = contain("import random\nos = random._os\nreturn str(os.listdir('/'))").await;
    assert!(error.contains("Error"), "{error}");
}

#[tokio::test]
async fn sockets_are_refused() {
    let error = contain("import socket\nsocket.create_connection(('1.1.1.1', 80))").await;
    assert!(
        error.contains("ImportError: import of 'socket' is not allowed"),
        "{error}"
    );
    // Around the import guard, WASI itself has no network to give.
    let error = contain(
        "import random\nreal_import = random._os.sys.modules['builtins'].__import__\n_socket = real_import('_socket')\ns = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\ns.connect(('1.1.1.1', 80))",
    )
    .await;
    assert!(error.contains("Error"), "{error}");
    assert!(!error.contains("survived"), "{error}");
}

#[tokio::test]
async fn ctypes_cannot_be_imported() {
    let error = contain("import ctypes").await;
    assert!(
        error.contains("ImportError: import of 'ctypes' is not allowed"),
        "{error}"
    );
}

#[tokio::test]
async fn subprocess_cannot_be_imported() {
    let error = contain("import subprocess\nsubprocess.run(['id'])").await;
    assert!(
        error.contains("ImportError: import of 'subprocess' is not allowed"),
        "{error}"
    );
}

#[tokio::test]
async fn endless_printing_is_cut_at_the_bound_and_the_call_goes_on() {
    let source = "def chatty() -> int:\n    for i in range(20_000):\n        print('line', i)\n    return i\n";
    let (run, _) = common::run_tool(source, "chatty", json!({}), json!({})).await;
    let run = run.unwrap();
    assert_eq!(run.value, json!(19_999), "the code ran to the end");
    assert!(
        run.stdout.starts_with("line 0\nline 1\n"),
        "{}",
        &run.stdout[..40]
    );
    assert!(
        run.stdout.len() <= pysandbox::Limits::default().output_bytes,
        "{} bytes kept",
        run.stdout.len()
    );
}

#[tokio::test]
async fn a_flood_of_tool_calls_is_cut_off_by_the_host() {
    let source = "def flood() -> list:\n    futures = [async_tools.anything({'i': i}) for i in range(1000)]\n    codes = [f().status_code for f in futures]\n    return [codes.count(404), codes.count(429)]\n";
    let (run, _) = common::run_tool(source, "flood", json!({}), json!({})).await;
    assert_eq!(
        run.unwrap().value,
        json!([256, 744]),
        "the host saw 256 calls at most"
    );
}

/// Every call starts from the interpreter's snapshot, however much the call before changed it and
/// however scattered its writes: here a call marks every module it can import, a class of the
/// runtime, the builtins and a few megabytes of heap, and the next call must find none of it. The
/// writes land on pages all over the interpreter's memory, many more separate stretches than
/// wasmtime's reset collects in one pass (third_party/wasmtime/PATCHED.md), so a reset that stops
/// early would let a mark through.
#[tokio::test]
async fn nothing_a_call_changes_reaches_the_next_call() {
    let source = r#"
import base64, calendar, collections, csv, datetime, decimal, difflib, enum, fractions
import functools, hashlib, heapq, html, itertools, json, logging, math, operator, pprint
import random, re, statistics, string, struct, textwrap, types, typing, unicodedata, uuid

# Every module in reach: the imports above, and the runtime's own (ces_public).
MODULES = [value for value in list(globals().values()) if isinstance(value, types.ModuleType)]

def probe(mark: str) -> dict:
    """Reports the marks a previous call left, then leaves its own."""
    found = {m.__name__: getattr(m, "_left_by", None) for m in MODULES}
    found["math.pi"] = math.pi
    found["Part"] = getattr(Part, "_left_by", None)
    found["len"] = len("abc")
    for m in MODULES:
        m._left_by = mark
    math.pi = 3.0
    Part._left_by = mark
    __builtins__["len"] = lambda value: -1
    # Megabytes of the mark, kept alive until the call ends, so that the heap grows and pages
    # past the snapshot are written too.
    probe.kept = [mark * 512 for _ in range(8192)]
    # The marks did land, within this call.
    found["marked"] = (
        all(m._left_by == mark for m in MODULES) and len("abc") == -1 and math.pi == 3.0
    )
    return found
"#;
    let tool = common::tool_of("probe.py", source, "probe", Arc::new(pysandbox::NoHost)).await;
    // What the first call finds: no module, nor the runtime's class, carries a mark, and the
    // builtins and math.pi are Python's own; every later call must find the same.
    let mut pristine = serde_json::Map::new();
    for name in source
        .lines()
        .filter(|l| l.starts_with("import "))
        .flat_map(|l| l["import ".len()..].split(", "))
        .chain(["ces_public", "Part"])
    {
        pristine.insert(name.trim().to_owned(), serde_json::Value::Null);
    }
    assert_eq!(pristine.len(), 31, "{pristine:?}");
    pristine.insert("math.pi".to_owned(), json!(std::f64::consts::PI));
    pristine.insert("len".to_owned(), json!(3));
    pristine.insert("marked".to_owned(), json!(true));
    let pristine = serde_json::Value::Object(pristine);
    for mark in ["first", "second", "third"] {
        let mut ctx = common::tool_context(json!({}));
        let run = tool
            .invoke(common::obj(json!({"mark": mark})), &mut ctx)
            .await
            .unwrap();
        assert_eq!(
            run.value, pristine,
            "the call marked {mark:?} found another's marks"
        );
    }
}
