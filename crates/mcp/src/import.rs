//! Reading the servers of another client's configuration file: Claude Desktop's and Cursor's
//! `mcpServers` (and Claude Code's `.mcp.json`, the same shape with a `type`), and VS Code's
//! `servers`. Values of environment variables and headers come out apart from the
//! configuration, for the vault. What cannot be taken as it is (a VS Code `${input:…}`, a
//! legacy SSE server) is said in a warning instead of failing the whole file.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::config::{DEFAULT_TIMEOUT_SECS, Resolved, ServerConfig, TransportConfig, slug};

/// What an import gave.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    /// The servers, each with its secrets.
    pub servers: Vec<Resolved>,
    /// What was skipped or may need the user's attention, one line each (English; the names
    /// are the file's).
    pub warnings: Vec<String>,
}

/// Why a file could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// Not JSON (VS Code's comments and trailing commas are allowed).
    #[error("not a JSON file: {0}")]
    NotJson(String),
    /// JSON without `mcpServers` or `servers`.
    #[error("no \"mcpServers\" or \"servers\" object in the file")]
    NoServers,
}

/// Reads `text`, giving each server an id that is not in `taken` (nor used twice).
pub fn parse(text: &str, taken: &[String]) -> Result<Imported, ImportError> {
    let root: Value = serde_json::from_str(&strip_jsonc(text))
        .map_err(|e| ImportError::NotJson(e.to_string()))?;
    // VS Code's settings.json nests it under "mcp".
    let root = root.get("mcp").filter(|v| v.is_object()).unwrap_or(&root);
    let servers = root
        .get("mcpServers")
        .or_else(|| root.get("servers"))
        .and_then(Value::as_object)
        .ok_or(ImportError::NoServers)?;
    let mut out = Imported::default();
    let mut used: Vec<String> = taken.to_vec();
    for (name, entry) in servers {
        let Some(entry) = entry.as_object() else {
            out.warnings.push(format!("{name}: not an object, skipped"));
            continue;
        };
        match one(name, entry, &mut out.warnings) {
            Some(mut server) => {
                server.config.id = unique(&slug(name), &used);
                used.push(server.config.id.clone());
                out.servers.push(server);
            }
            None => continue,
        }
    }
    Ok(out)
}

fn one(name: &str, entry: &Map<String, Value>, warnings: &mut Vec<String>) -> Option<Resolved> {
    let kind = entry.get("type").and_then(Value::as_str).unwrap_or("");
    let strings = |key: &str| -> BTreeMap<String, String> {
        entry
            .get(key)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (transport, env, headers) = if let Some(url) = entry
        .get("url")
        .or_else(|| entry.get("serverUrl"))
        .and_then(Value::as_str)
    {
        if kind == "sse" {
            warnings.push(format!(
                "{name}: a legacy SSE server; it is tried over Streamable HTTP, which most such servers also serve"
            ));
        }
        let headers = strings("headers");
        let transport = TransportConfig::Http {
            url: url.to_owned(),
            headers: headers.keys().cloned().collect(),
        };
        (transport, BTreeMap::new(), headers)
    } else if let Some(command) = entry.get("command").and_then(Value::as_str) {
        let args = entry
            .get("args")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let env = strings("env");
        let transport = TransportConfig::Stdio {
            command: command.to_owned(),
            args,
            env: env.keys().cloned().collect(),
            cwd: entry.get("cwd").and_then(Value::as_str).map(str::to_owned),
        };
        (transport, env, BTreeMap::new())
    } else {
        warnings.push(format!("{name}: neither \"command\" nor \"url\", skipped"));
        return None;
    };
    for (key, value) in env.iter().chain(headers.iter()) {
        if value.contains("${input:") || value.contains("${env:") {
            warnings.push(format!(
                "{name}: {key} refers to {value}, which only the other app can fill in; enter its value in the server's settings"
            ));
        }
    }
    let config = ServerConfig {
        id: String::new(),
        name: name.to_owned(),
        transport,
        enabled: !entry
            .get("disabled")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        trusted: false,
        read_tools: Vec::new(),
        timeout_secs: DEFAULT_TIMEOUT_SECS,
    };
    Some(Resolved {
        config,
        env,
        headers,
        credentials: None,
    })
}

/// `base`, or `base-2`, `base-3`… whichever is not taken.
fn unique(base: &str, taken: &[String]) -> String {
    if !taken.iter().any(|t| t == base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| {
            let suffix = format!("-{n}");
            let keep = crate::config::MAX_ID_LEN - suffix.len();
            format!("{}{suffix}", &base[..base.len().min(keep)])
        })
        .find(|id| !taken.contains(id))
        .unwrap_or_else(|| base.to_owned())
}

/// Drops `//` and `/* */` comments and trailing commas outside strings (VS Code's JSONC).
fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '/' if chars.peek() == Some(&'/') => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for n in chars.by_ref() {
                    if last == '*' && n == '/' {
                        break;
                    }
                    last = n;
                }
            }
            ',' => {
                let rest: String = chars.clone().collect();
                let next = rest.trim_start().chars().next();
                if !matches!(next, Some('}') | Some(']')) {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn claude_desktop_servers_come_with_their_secrets_apart() {
        let text = r#"{"mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "GitHub": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"],
                       "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"}},
            "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abc"}}
        }}"#;
        let got = parse(text, &[]).unwrap();
        assert!(got.warnings.is_empty(), "{:?}", got.warnings);
        let ids: Vec<_> = got.servers.iter().map(|s| s.config.id.as_str()).collect();
        assert_eq!(ids, ["filesystem", "github", "remote"]);
        let gh = &got.servers[1];
        assert_eq!(gh.env["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_secret");
        let settings = serde_json::to_string(&gh.config).unwrap();
        assert!(!settings.contains("ghp_secret"), "{settings}");
        assert!(settings.contains("GITHUB_PERSONAL_ACCESS_TOKEN"));
        let remote = &got.servers[2];
        assert!(
            matches!(&remote.config.transport, TransportConfig::Http { headers, .. } if headers == &["Authorization"])
        );
        assert_eq!(remote.headers["Authorization"], "Bearer abc");
        for s in &got.servers {
            s.config.validate().unwrap();
            assert!(!s.config.trusted, "imported servers are never trusted");
        }
    }

    #[test]
    fn vs_code_files_with_comments_inputs_and_sse_are_read_with_warnings() {
        let text = r#"{
          // VS Code's .vscode/mcp.json
          "inputs": [{"type": "promptString", "id": "key", "password": true}],
          "servers": {
            "perplexity": {"type": "stdio", "command": "npx", "args": ["-y", "server-perplexity-ask"],
                           "env": {"PERPLEXITY_API_KEY": "${input:key}"}},
            "old": {"type": "sse", "url": "http://localhost:3000/sse",}, /* trailing comma */
            "broken": {"type": "stdio"},
            "off": {"command": "x", "disabled": true}
          }
        }"#;
        let got = parse(text, &["perplexity".to_owned()]).unwrap();
        let ids: Vec<_> = got.servers.iter().map(|s| s.config.id.as_str()).collect();
        assert_eq!(ids, ["perplexity-2", "old", "off"]);
        assert!(!got.servers[2].config.enabled);
        assert_eq!(got.warnings.len(), 3, "{:?}", got.warnings);
        assert!(got.warnings.iter().any(|w| w.contains("${input:key}")));
        assert!(
            got.warnings
                .iter()
                .any(|w| w.starts_with("old: a legacy SSE"))
        );
        assert!(got.warnings.iter().any(|w| w.starts_with("broken:")));
    }

    #[test]
    fn files_without_servers_are_refused_with_the_reason() {
        assert_eq!(parse("{}", &[]).unwrap_err(), ImportError::NoServers);
        assert!(matches!(
            parse("not json", &[]),
            Err(ImportError::NotJson(_))
        ));
        // A comment marker inside a string is text, not a comment.
        let got = parse(
            r#"{"mcpServers": {"a": {"url": "https://x.example/mcp//v1"}}}"#,
            &[],
        )
        .unwrap();
        assert!(
            matches!(&got.servers[0].config.transport, TransportConfig::Http { url, .. } if url == "https://x.example/mcp//v1")
        );
    }
}
