//! The cost of one Python tool call: a fresh interpreter instance from the pre-linked component,
//! the user's file run, and one host call (`tools.get_weather`) answered by the host. Budget:
//! under 1 ms median (issue 26).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agent::{CallbackContext, ExternalResponse, ToolContext};
use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use pysandbox::{Host, HostCall, PythonModule, PythonTool, Reporter, Sandbox, SandboxConfig};
use serde_json::{Map, Value, json};

const LOOKUP: &str = r#"
def lookup(city: str) -> dict:
    """Looks the weather up through another tool."""
    response = tools.get_weather({"city": city})
    response.raise_for_status()
    set_variable("last_city", city)
    return response.json()
"#;

struct WeatherHost;

#[async_trait]
impl Host for WeatherHost {
    async fn call_tool(
        &self,
        _name: &str,
        args: Map<String, Value>,
        _call: &HostCall,
    ) -> ExternalResponse {
        ExternalResponse::new(200, json!({"city": args["city"], "temp_c": 21}).to_string())
    }
}

fn python_tool_call(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let module = Arc::new(
        rt.block_on(PythonModule::load(&sandbox, "lookup.py", LOOKUP))
            .unwrap(),
    );
    let spec = module.tools()[0].clone();
    let tool = PythonTool::new(
        module,
        spec,
        sandbox,
        Arc::new(WeatherHost),
        Reporter::default(),
    );
    let mut args = Map::new();
    args.insert("city".to_owned(), json!("Beijing"));
    let base = CallbackContext::new("inv", "assistant", "s1", Map::new(), Arc::default());
    c.bench_function("python_tool_call", |b| {
        b.iter(|| {
            let mut ctx = ToolContext::new(base.clone(), "call-1");
            let run = rt.block_on(tool.invoke(args.clone(), &mut ctx)).unwrap();
            assert_eq!(run.value["temp_c"], 21);
        });
    });
}

criterion_group!(benches, python_tool_call);
criterion_main!(benches);
