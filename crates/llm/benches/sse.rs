//! Throughput of stream parsing: a realistic Chat Completions stream (text deltas, then two tool
//! calls whose arguments arrive in small fragments, a usage chunk and `[DONE]`) read by the same
//! SSE parser and chunk decoder the OpenAI-compatible provider runs, in 4 KiB network reads.

use std::collections::VecDeque;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llm::ChatStreamParser;
use llm::sse::SseParser;
use serde_json::json;

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-BenchMark0123456789",
        "object": "chat.completion.chunk",
        "created": 1_764_500_000,
        "model": "gpt-4.1-mini-2025-04-14",
        "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null,
    });
    format!("data: {chunk}\n\n")
}

/// One answer of about `text_deltas` text chunks and two tool calls.
fn answer(text_deltas: usize) -> String {
    let words = [
        "明天",
        "上午",
        " 10 点",
        "有",
        "产品",
        "周会",
        "，",
        "下午",
        "3 点",
        "以后",
        "是空的",
        "。",
        " The",
        " review",
        " with",
        " the",
        " design",
        " team",
        " moves",
        " to",
        " Friday",
        ".",
    ];
    let mut out = chunk(json!({"role": "assistant", "content": ""}), None);
    for i in 0..text_deltas {
        out += &chunk(json!({"content": words[i % words.len()]}), None);
    }
    let calls = [
        (
            "call_0",
            "list_calendar_events",
            r#"{"start_time":"2026-12-01T00:00:00+08:00","end_time":"2026-12-02T00:00:00+08:00","calendar_id":"primary","page_size":50}"#,
        ),
        (
            "call_1",
            "create_calendar_event",
            r#"{"summary":"产品评审","start_time":"2026-12-01T15:00:00+08:00","end_time":"2026-12-01T16:00:00+08:00","attendees":["ou_7d8a6e6df7621556ce0d21922b676706ccs","ou_3b8d5a1e2f7c4d6e8a9b0c1d2e3f4a5b6c"],"description":"评审 Q1 路线图，请提前阅读文档。"}"#,
        ),
    ];
    for (index, (id, name, args)) in calls.iter().enumerate() {
        out += &chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        );
        let letters: Vec<char> = args.chars().collect();
        for fragment in letters.chunks(6) {
            let fragment: String = fragment.iter().collect();
            out += &chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                None,
            );
        }
    }
    out += &chunk(json!({}), Some("tool_calls"));
    out += "data: {\"id\":\"chatcmpl-BenchMark0123456789\",\"object\":\"chat.completion.chunk\",\"created\":1764500000,\"model\":\"gpt-4.1-mini-2025-04-14\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":300,\"total_tokens\":1500}}\n\n";
    out += "data: [DONE]\n\n";
    out
}

fn parse_answer(bytes: &[u8]) -> usize {
    let mut parser = ChatStreamParser::new();
    let mut out = VecDeque::new();
    let mut items = 0;
    for read in bytes.chunks(4096) {
        let ended = parser.push(read, &mut out).unwrap_or(true);
        items += out.len();
        out.clear();
        if ended {
            break;
        }
    }
    items
}

fn bench(c: &mut Criterion) {
    let stream = answer(2000);
    let bytes = stream.as_bytes();
    assert!(parse_answer(bytes) > 2000, "the stream must parse");

    let mut group = c.benchmark_group("sse");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("openai_stream_parse", |b| {
        b.iter(|| black_box(parse_answer(black_box(bytes))));
    });
    group.bench_function("sse_events_only", |b| {
        b.iter(|| {
            let mut parser = SseParser::new();
            let mut events = Vec::new();
            for read in bytes.chunks(4096) {
                parser
                    .push(black_box(read), &mut events)
                    .unwrap_or_default();
            }
            black_box(events.len())
        });
    });
    group.finish();

    // One large event (a long tool argument, say) arriving in small reads: each read must cost
    // its own bytes, not a new search of everything buffered before it.
    let long = format!("data: {}\n\n", "x".repeat(256 * 1024));
    let mut group = c.benchmark_group("sse_long_line");
    group.throughput(Throughput::Bytes(long.len() as u64));
    group.bench_function("one_256k_line_in_64_byte_reads", |b| {
        b.iter(|| {
            let mut parser = SseParser::new();
            let mut events = Vec::new();
            for read in long.as_bytes().chunks(64) {
                parser
                    .push(black_box(read), &mut events)
                    .unwrap_or_default();
            }
            assert_eq!(events.len(), 1);
            black_box(events.len())
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
