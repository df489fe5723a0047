//! What a server's refusal asks for, and when to stop asking the user. A 403 with
//! `insufficient_scope` names the scopes the request needs: the user is asked to sign in again
//! for them (a step-up), unless the tokens were already granted every one of them (signing in
//! again would change nothing) or the user already signed in for them twice and the server
//! still refuses. Without that limit a server that never accepts would send the user through
//! sign-in after sign-in.

use agent::{ToolOutcome, ToolResult, ToolReturn};

/// Sign-ins for one set of scopes a server keeps refusing, before the call fails instead.
pub(crate) const MAX_STEP_UPS: u32 = 2;

/// The scopes a 403 asked for, and how many sign-ins were begun for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepUp {
    pub(crate) scopes: Vec<String>,
    pub(crate) sign_ins: u32,
}

/// What to do about a 403 `insufficient_scope`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Ask the user to sign in for these scopes too.
    Ask(Vec<String>),
    /// Fail the call, for this reason.
    GiveUp(String),
}

/// The space-separated scopes of a challenge's `scope`.
pub(crate) fn scopes(scope: Option<&str>) -> Vec<String> {
    scope
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Whether every scope of `some` is in `all`.
fn within(some: &[String], all: &[String]) -> bool {
    some.iter().all(|s| all.contains(s))
}

/// Decides on a 403 asking for `asked`, the tokens having been granted `granted`; `state`
/// remembers the step-up across calls.
pub(crate) fn step_up(state: &mut Option<StepUp>, asked: &[String], granted: &[String]) -> Verdict {
    if asked.is_empty() {
        return Verdict::GiveUp("refuses the request for a permission it does not name".into());
    }
    let named = asked.join(" ");
    if within(asked, granted) {
        return Verdict::GiveUp(format!(
            "refuses the request although the sign-in was granted what it asks for ({named})"
        ));
    }
    match state {
        Some(step) if within(asked, &step.scopes) && within(&step.scopes, asked) => {
            if step.sign_ins >= MAX_STEP_UPS {
                return Verdict::GiveUp(format!(
                    "still refuses the request after {} sign-ins for {named}",
                    step.sign_ins
                ));
            }
        }
        _ => {
            *state = Some(StepUp {
                scopes: asked.to_vec(),
                sign_ins: 0,
            })
        }
    }
    Verdict::Ask(asked.to_vec())
}

/// `before` and then whatever of `more` it lacks.
pub(crate) fn union(before: &[String], more: &[String]) -> Vec<String> {
    let mut all = before.to_vec();
    for scope in more {
        if !all.contains(scope) {
            all.push(scope.clone());
        }
    }
    all
}

/// The engine's "the user must sign in" result for server `name`, with the scopes the sign-in
/// will ask for when they are known: the call waits behind an authorization card and runs
/// again after.
pub(crate) fn sign_in_needed(name: &str, scopes: &[String]) -> ToolReturn {
    let what = if scopes.is_empty() {
        String::new()
    } else {
        format!(" and grant {}", scopes.join(", "))
    };
    ToolResult::new(ToolOutcome::NeedsUserAuth)
        .with_content(format!(
            "The user must sign in to the MCP server {name}{what}. The app is showing them a sign-in card; the call runs again by itself afterwards."
        ))
        .with_auth_scopes(scopes.iter().cloned())
        .into()
}

/// A failed result: server `name` `what`.
pub(crate) fn failed(name: &str, what: &str) -> ToolReturn {
    ToolResult::new(ToolOutcome::Failed)
        .with_content(format!("MCP server {name} {what}"))
        .into()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn v(list: &str) -> Vec<String> {
        scopes(Some(list))
    }

    #[test]
    fn a_step_up_asks_for_what_is_missing_twice_then_gives_up() {
        let mut state = None;
        let asked = v("mcp:basic mcp:write");
        assert_eq!(
            step_up(&mut state, &asked, &v("mcp:basic")),
            Verdict::Ask(asked.clone())
        );
        // Each sign-in for it counts (the sign-in does the counting).
        for n in 1..=MAX_STEP_UPS {
            state.as_mut().unwrap().sign_ins = n;
            let verdict = step_up(&mut state, &v("mcp:write mcp:basic"), &v("mcp:basic"));
            if n < MAX_STEP_UPS {
                assert_eq!(verdict, Verdict::Ask(v("mcp:write mcp:basic")));
            } else {
                assert!(
                    matches!(verdict, Verdict::GiveUp(why) if why.contains("after 2 sign-ins"))
                );
            }
        }
        // Other scopes are a new request, with sign-ins of their own.
        assert_eq!(
            step_up(&mut state, &v("mcp:admin"), &v("mcp:basic")),
            Verdict::Ask(v("mcp:admin"))
        );
        assert_eq!(state.unwrap().sign_ins, 0);
    }

    #[test]
    fn a_refusal_for_scopes_already_granted_or_unnamed_is_not_a_sign_in() {
        let mut state = None;
        assert!(matches!(
            step_up(&mut state, &v("mcp:admin"), &v("mcp:admin offline_access")),
            Verdict::GiveUp(why) if why.contains("granted what it asks for (mcp:admin)")
        ));
        assert!(matches!(step_up(&mut state, &[], &[]), Verdict::GiveUp(_)));
        assert_eq!(state, None);
        assert_eq!(union(&v("a b"), &v("b c")), v("a b c"));
    }
}
