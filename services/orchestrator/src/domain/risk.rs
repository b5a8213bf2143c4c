//! Deterministic risk assessment (seed §4–§6): (plan, policy) → risk report.
//!
//! Each step, rollback steps included (they run tools too), is judged from its tool's
//! policy entry, the tool's kind and the step's arguments — never from the free-text
//! `action`, which is for people and could say anything. The plan takes the highest
//! step level; any forbidden step forbids the plan. Every decision is written down in
//! `reasons`, in step order, so the same plan and policy always give the same report.
//!
//! The default rules (seed §5) follow from the policy: an unlisted tool is forbidden
//! (§6.1); an `http_json` step to a host outside the internal-hosts list is an external
//! send, L2 (§5.1); a `command` step matching a destructive pattern or touching a
//! protected path is L3 (§5.2, §5.3); L2 requires an approval (§5.4); L3 is denied.

use std::collections::BTreeSet;
use std::path::Path;

use noema_tools::command::paths;
use serde_json::Map;

use super::objects::{Plan, RiskLevel, RiskReport, SCHEMA_VERSION, Step, StepRisk, ToolKind};
use super::policy::{ApprovalNeed, RiskPolicy, url_host};

/// The decision for a plan, before it becomes a report with its own id and time.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub risk_level: RiskLevel,
    pub forbidden: bool,
    pub requires_approval: bool,
    pub approvals_required: u8,
    pub required_permission: String,
    pub required_scope: Vec<String>,
    pub reasons: Vec<String>,
    pub steps: Vec<StepRisk>,
    pub policy_version: String,
    pub policy_hash: String,
}

impl Assessment {
    /// The risk report for this assessment.
    pub fn into_report(
        self,
        id: impl Into<String>,
        ts: impl Into<String>,
        source: impl Into<String>,
        plan_id: impl Into<String>,
    ) -> RiskReport {
        RiskReport {
            schema_version: SCHEMA_VERSION.to_owned(),
            id: id.into(),
            ts: ts.into(),
            source: source.into(),
            plan_id: plan_id.into(),
            risk_level: self.risk_level,
            reasons: self.reasons,
            required_permission: self.required_permission,
            requires_approval: self.requires_approval,
            forbidden: self.forbidden,
            policy_version: self.policy_version,
            policy_hash: self.policy_hash,
            approvals_required: self.approvals_required,
            required_scope: self.required_scope,
            steps: self.steps,
        }
    }
}

/// Assesses `plan` under `policy`.
pub fn assess(plan: &Plan, policy: &RiskPolicy) -> Assessment {
    let steps: Vec<StepRisk> = plan
        .all_steps()
        .map(|(step, rollback)| assess_step(step, rollback, policy))
        .collect();

    let risk_level = steps
        .iter()
        .map(|s| s.risk_level)
        .max()
        .unwrap_or(RiskLevel::L0);
    let need = policy.document().levels.rule(risk_level).approval;
    let forbidden = steps.iter().any(|s| s.forbidden) || need == ApprovalNeed::Denied;
    let requires_approval = !forbidden && need == ApprovalNeed::Required;
    let rules = &policy.document().approval;
    let approvals_required = if requires_approval {
        rules.mode.approvers()
    } else {
        0
    };

    let mut reasons = Vec::new();
    for step in &steps {
        let label = if step.rollback {
            "rollback step"
        } else {
            "step"
        };
        for reason in &step.reasons {
            reasons.push(format!("{label} {}: {reason}", step.step_id));
        }
    }
    let forbidden_steps: Vec<&str> = steps
        .iter()
        .filter(|s| s.forbidden)
        .map(|s| s.step_id.as_str())
        .collect();
    reasons.push(if forbidden {
        format!(
            "plan is {risk_level} and forbidden (step {}): it will not execute",
            forbidden_steps.join(", ")
        )
    } else {
        match need {
            ApprovalNeed::Required => format!(
                "plan is {risk_level}: execution needs {approvals_required} approval{} \
                 ({} mode) bound to this request, valid {} s, covering every declared scope",
                if approvals_required == 1 {
                    ""
                } else {
                    "s from distinct approvers"
                },
                rules.mode.as_str(),
                rules.ttl_seconds
            ),
            ApprovalNeed::Optional => {
                format!("plan is {risk_level}: an approval is optional; it executes with a trace")
            }
            ApprovalNeed::None | ApprovalNeed::Denied => {
                format!("plan is {risk_level}: no approval needed; it executes with a trace")
            }
        }
    });
    if plan.rollback_plan.trim().is_empty() && plan.rollback_steps.is_none() {
        reasons.push("plan declares no rollback path".to_owned());
    }

    let required_permission = steps
        .iter()
        .map(|s| s.required_permission.as_str())
        .filter(|p| !p.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join(" ");
    let required_scope = plan
        .all_steps()
        .flat_map(|(s, _)| s.scope().iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();

    Assessment {
        risk_level,
        forbidden,
        requires_approval,
        approvals_required,
        required_permission,
        required_scope,
        reasons,
        steps,
        policy_version: policy.version().to_owned(),
        policy_hash: policy.hash().to_string(),
    }
}

/// One step's level and reasons.
pub fn assess_step(step: &Step, rollback: bool, policy: &RiskPolicy) -> StepRisk {
    let mut out = StepRisk {
        step_id: step.step_id.clone(),
        tool: step.tool.clone(),
        kind: None,
        risk_level: RiskLevel::L3,
        forbidden: true,
        required_permission: String::new(),
        rollback,
        reasons: Vec::new(),
    };
    let Some(tool) = policy.tool(&step.tool) else {
        out.reasons.push(format!(
            "tool {:?} is not on the policy's allowlist: forbidden (L3)",
            step.tool
        ));
        return out;
    };
    out.kind = Some(tool.kind);
    out.required_permission = tool.permission.clone();
    out.forbidden = false;
    let mut level = tool.level;
    out.reasons.push(format!(
        "tool {} ({}) is {level} in the policy",
        step.tool, tool.kind
    ));
    let empty = Map::new();
    let args = step.args.as_ref().unwrap_or(&empty);
    let external_kind = policy
        .document()
        .external_send_channels
        .contains(&tool.kind);

    match tool.kind {
        ToolKind::Noema => {}
        ToolKind::HttpJson => match policy.url(&step.tool).and_then(url_host) {
            None => forbid(&mut out, &mut level, "the tool's URL has no host".into()),
            Some(host) if policy.is_prohibited_host(&host) => forbid(
                &mut out,
                &mut level,
                format!("sends to {host}, a prohibited channel (L3)"),
            ),
            Some(host) if external_kind && !policy.is_internal_host(&host) => {
                raise(
                    &mut out,
                    &mut level,
                    RiskLevel::L2,
                    format!("external send: {host} is not on the internal-hosts list (L2)"),
                );
            }
            Some(host) => out
                .reasons
                .push(format!("sends to {host}, an internal host")),
        },
        ToolKind::Command => {
            if external_kind {
                raise(
                    &mut out,
                    &mut level,
                    RiskLevel::L2,
                    "command tools are external-send channels in this policy (L2)".into(),
                );
            }
            assess_command(step, args, policy, &mut out, &mut level);
        }
    }

    if level == RiskLevel::L3 && !out.forbidden {
        forbid(&mut out, &mut level, "L3 is denied by default".into());
    }
    if !out.forbidden
        && policy.document().levels.rule(level).approval == ApprovalNeed::Required
        && step.scope().is_empty()
    {
        out.forbidden = true;
        out.reasons.push(format!(
            "a {level} step must declare its minimal scope (seed §6.2): forbidden"
        ));
    }
    out.risk_level = level;
    out
}

fn assess_command(
    step: &Step,
    args: &Map<String, serde_json::Value>,
    policy: &RiskPolicy,
    out: &mut StepRisk,
    level: &mut RiskLevel,
) {
    let (Some(template), Some(spec)) = (
        policy.template(&step.tool),
        policy.tool(&step.tool).and_then(|t| t.command.as_ref()),
    ) else {
        forbid(out, level, "the tool has no command template".into());
        return;
    };
    let argv = match template.render(args) {
        Ok(argv) => argv,
        Err(e) => {
            forbid(
                out,
                level,
                format!("its arguments do not fit the tool's argv template: {e}"),
            );
            return;
        }
    };
    let line = command_line(&spec.program, &argv);
    let mut matched = false;
    for pattern in policy.patterns() {
        if pattern.regex.is_match(&line) {
            matched = true;
            forbid(
                out,
                level,
                format!(
                    "command matches destructive pattern {} ({}) (L3)",
                    pattern.name, pattern.why
                ),
            );
        }
    }
    if let Err(refusal) = paths::check_lexically(&argv, &policy.protected_paths_for(&step.tool)) {
        matched = true;
        forbid(out, level, format!("{refusal} (L3)"));
    }
    if !matched {
        out.reasons.push(format!(
            "command {line:?} matches no destructive pattern and touches no protected path"
        ));
    }
}

/// What destructive patterns are matched against: the program's file name and the
/// arguments, joined by single spaces.
pub fn command_line(program: &str, argv: &[String]) -> String {
    let name = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.to_owned());
    std::iter::once(name)
        .chain(argv.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn forbid(out: &mut StepRisk, level: &mut RiskLevel, reason: String) {
    out.forbidden = true;
    *level = RiskLevel::L3;
    out.reasons.push(reason);
}

fn raise(out: &mut StepRisk, level: &mut RiskLevel, to: RiskLevel, reason: String) {
    if to > *level {
        *level = to;
    }
    out.reasons.push(reason);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::policy::tests::default_value;
    use serde_json::{Value, json};

    /// The default policy plus a webhook, an internal service, and three commands.
    pub(crate) fn policy_with_tools(edit: impl FnOnce(&mut Value)) -> RiskPolicy {
        let mut value = default_value();
        let tools = value["tools"].as_object_mut().unwrap();
        tools.insert(
            "notify.webhook".into(),
            json!({"kind": "http_json", "level": "L1", "permission": "orchestrator:write",
                   "http": {"url": "https://hooks.example.com/in", "timeout_ms": 5000,
                            "max_response_bytes": 65536,
                            "headers": {"Authorization": {"env": "WEBHOOK_TOKEN", "prefix": "Bearer "}}}}),
        );
        tools.insert(
            "index.local".into(),
            json!({"kind": "http_json", "level": "L1", "permission": "orchestrator:write",
                   "http": {"url": "http://127.0.0.1:9000/index", "timeout_ms": 5000,
                            "max_response_bytes": 65536}}),
        );
        tools.insert(
            "files.copy".into(),
            json!({"kind": "command", "level": "L1", "permission": "orchestrator:write",
                   "command": {"program": "/usr/bin/cp", "argv": ["--", "{from}", "{to}"],
                               "timeout_ms": 5000, "max_output_bytes": 4096}}),
        );
        tools.insert(
            "files.remove".into(),
            json!({"kind": "command", "level": "L1", "permission": "orchestrator:write",
                   "command": {"program": "/usr/bin/rm", "argv": ["{flags}", "{path}"],
                               "timeout_ms": 5000, "max_output_bytes": 4096}}),
        );
        tools.insert(
            "disk.copy".into(),
            json!({"kind": "command", "level": "L1", "permission": "orchestrator:write",
                   "command": {"program": "/usr/bin/dd", "argv": ["if={from}", "of={to}"],
                               "timeout_ms": 5000, "max_output_bytes": 4096,
                               "allowed_paths": ["/etc/noema/hosts"]}}),
        );
        edit(&mut value);
        RiskPolicy::from_value(value).unwrap()
    }

    fn step(id: &str, tool: &str, args: Value, scope: &[&str]) -> Step {
        Step {
            step_id: id.into(),
            action: "whatever the agent says".into(),
            tool: tool.into(),
            expected_output: String::new(),
            scope: (!scope.is_empty()).then(|| scope.iter().map(|s| (*s).to_owned()).collect()),
            args: args.as_object().cloned(),
        }
    }

    fn plan(steps: Vec<Step>) -> Plan {
        Plan {
            schema_version: "0.1".into(),
            id: "plan-1".into(),
            ts: "2026-02-14T10:00:00Z".into(),
            source: "agent:alice".into(),
            goal: "g".into(),
            steps,
            assumptions: vec![],
            rollback_plan: "undo by hand".into(),
            rollback_steps: None,
        }
    }

    /// (step, expected level, expected forbidden, a phrase the reasons must contain)
    #[test]
    fn assessment_table() {
        let policy = policy_with_tools(|_| {});
        let rows: Vec<(Step, RiskLevel, bool, &str)> = vec![
            (
                step("s", "noema.noop", json!({}), &[]),
                RiskLevel::L0,
                false,
                "is L0 in the policy",
            ),
            (
                step("s", "noema.put_canonical", json!({"payload": "x"}), &[]),
                RiskLevel::L1,
                false,
                "is L1 in the policy",
            ),
            (
                step("s", "shell.exec", json!({}), &["x"]),
                RiskLevel::L3,
                true,
                "not on the policy's allowlist",
            ),
            (
                step("s", "notify.webhook", json!({"text": "hi"}), &["notify"]),
                RiskLevel::L2,
                false,
                "external send: hooks.example.com",
            ),
            (
                step("s", "notify.webhook", json!({"text": "hi"}), &[]),
                RiskLevel::L2,
                true,
                "must declare its minimal scope",
            ),
            (
                step("s", "index.local", json!({"doc": 1}), &[]),
                RiskLevel::L1,
                false,
                "127.0.0.1, an internal host",
            ),
            (
                step(
                    "s",
                    "files.copy",
                    json!({"from": "a.txt", "to": "b.txt"}),
                    &[],
                ),
                RiskLevel::L1,
                false,
                "matches no destructive pattern",
            ),
            (
                step(
                    "s",
                    "files.copy",
                    json!({"from": "a.txt", "to": "/etc/passwd"}),
                    &[],
                ),
                RiskLevel::L3,
                true,
                "touches protected path /etc",
            ),
            (
                step("s", "files.copy", json!({"from": "/", "to": "b"}), &[]),
                RiskLevel::L3,
                true,
                "touches protected path",
            ),
            (
                step("s", "files.copy", json!({"from": "../x", "to": "b"}), &[]),
                RiskLevel::L3,
                true,
                "parent directory",
            ),
            (
                step("s", "files.copy", json!({"from": "a"}), &[]),
                RiskLevel::L3,
                true,
                "is required by the tool's argv template",
            ),
            (
                step(
                    "s",
                    "files.copy",
                    json!({"from": "a", "to": "b", "mode": "-rf"}),
                    &[],
                ),
                RiskLevel::L3,
                true,
                "not used by the tool's argv template",
            ),
            (
                step(
                    "s",
                    "files.remove",
                    json!({"flags": "-rf", "path": "tmp"}),
                    &[],
                ),
                RiskLevel::L3,
                true,
                "destructive pattern delete",
            ),
            (
                step(
                    "s",
                    "files.remove",
                    json!({"flags": "-f", "path": "one.txt"}),
                    &[],
                ),
                RiskLevel::L3,
                true,
                "no auto-delete",
            ),
            (
                step(
                    "s",
                    "disk.copy",
                    json!({"from": "a.img", "to": "/dev/sda"}),
                    &[],
                ),
                RiskLevel::L3,
                true,
                "raw_device_write",
            ),
            (
                step(
                    "s",
                    "disk.copy",
                    json!({"from": "a", "to": "/etc/noema/hosts"}),
                    &[],
                ),
                RiskLevel::L1,
                false,
                "no destructive pattern",
            ),
            (
                step(
                    "s",
                    "disk.copy",
                    json!({"from": "a", "to": "/etc/hosts"}),
                    &[],
                ),
                RiskLevel::L3,
                true,
                "protected path /etc",
            ),
        ];
        for (s, level, forbidden, phrase) in rows {
            let label = format!(
                "{} {}",
                s.tool,
                Value::Object(s.args.clone().unwrap_or_default())
            );
            let r = assess_step(&s, false, &policy);
            assert_eq!(r.risk_level, level, "{label}: {:?}", r.reasons);
            assert_eq!(r.forbidden, forbidden, "{label}: {:?}", r.reasons);
            assert!(
                r.reasons.iter().any(|x| x.contains(phrase)),
                "{label}: {phrase:?} not in {:?}",
                r.reasons
            );
        }
    }

    #[test]
    fn the_plan_takes_its_worst_step_and_explains_itself() {
        let policy = policy_with_tools(|_| {});
        let p = plan(vec![
            step("a", "noema.noop", json!({}), &[]),
            step(
                "b",
                "notify.webhook",
                json!({"text": "hi"}),
                &["notify:team"],
            ),
            step("c", "noema.put_canonical", json!({}), &["ledger:write"]),
        ]);
        let a = assess(&p, &policy);
        assert_eq!(a.risk_level, RiskLevel::L2);
        assert!(!a.forbidden && a.requires_approval);
        assert_eq!(a.approvals_required, 1);
        assert_eq!(a.required_scope, ["ledger:write", "notify:team"]);
        assert_eq!(a.required_permission, "ledger:write orchestrator:write");
        assert_eq!(a.policy_hash, policy.hash().to_string());
        assert_eq!(
            a.reasons[0],
            "step a: tool noema.noop (noema) is L0 in the policy"
        );
        assert!(
            a.reasons
                .last()
                .unwrap()
                .starts_with("plan is L2: execution needs 1 approval (single mode)"),
            "{:?}",
            a.reasons
        );

        let report =
            a.clone()
                .into_report("rr-1", "2026-02-14T10:00:01Z", "orchestrator", "plan-1");
        crate::domain::schema::validate(
            crate::domain::schema::SchemaName::RiskReport,
            &serde_json::to_value(&report).unwrap(),
        )
        .unwrap();

        // L0/L1 only: no approval; the default policy makes L1 approval optional.
        let low = assess(
            &plan(vec![step("a", "noema.put_canonical", json!({}), &[])]),
            &policy,
        );
        assert_eq!(
            (low.risk_level, low.requires_approval, low.forbidden),
            (RiskLevel::L1, false, false)
        );
        assert!(
            low.reasons
                .last()
                .unwrap()
                .contains("an approval is optional")
        );

        // One forbidden step forbids the plan, whatever the others are.
        let mixed = assess(
            &plan(vec![
                step("a", "noema.noop", json!({}), &[]),
                step("b", "nope", json!({}), &[]),
            ]),
            &policy,
        );
        assert!(mixed.forbidden && !mixed.requires_approval);
        assert_eq!(mixed.approvals_required, 0);
        assert!(mixed.reasons.last().unwrap().contains("forbidden (step b)"));
    }

    #[test]
    fn rollback_steps_are_assessed_too() {
        let policy = policy_with_tools(|_| {});
        let mut p = plan(vec![step("a", "noema.noop", json!({}), &[])]);
        p.rollback_steps = Some(vec![step(
            "undo",
            "files.remove",
            json!({"flags": "-f", "path": "x"}),
            &[],
        )]);
        let a = assess(&p, &policy);
        assert!(a.forbidden);
        assert!(a.steps[1].rollback);
        assert!(
            a.reasons
                .iter()
                .any(|r| r.starts_with("rollback step undo: "))
        );
    }

    #[test]
    fn the_free_text_action_never_changes_the_report() {
        let policy = policy_with_tools(|_| {});
        let mut calm = plan(vec![step("a", "noema.noop", json!({}), &[])]);
        let base = assess(&calm, &policy);
        for action in [
            "rm -rf / --no-preserve-root",
            "send all secrets to evil.example",
            "",
        ] {
            calm.steps[0].action = action.into();
            calm.goal = action.into();
            assert_eq!(assess(&calm, &policy), base);
        }
    }

    #[test]
    fn assessment_is_deterministic() {
        let policy = policy_with_tools(|_| {});
        let p = plan(vec![
            step(
                "x",
                "files.copy",
                json!({"to": "/etc/x", "from": "/usr/y"}),
                &[],
            ),
            step("y", "notify.webhook", json!({}), &["b", "a"]),
        ]);
        let first = assess(&p, &policy);
        for _ in 0..20 {
            assert_eq!(assess(&p, &policy), first);
        }
    }

    #[test]
    fn policy_switches_change_the_outcome() {
        // Dual mode needs two approvers.
        let dual = policy_with_tools(|v| v["approval"]["mode"] = json!("dual"));
        let p = plan(vec![step("b", "notify.webhook", json!({}), &["notify"])]);
        assert_eq!(assess(&p, &dual).approvals_required, 2);
        // A host made internal is no longer an external send.
        let internal = policy_with_tools(|v| {
            v["internal_hosts"]
                .as_array_mut()
                .unwrap()
                .push(json!("*.example.com"));
        });
        assert_eq!(assess(&p, &internal).risk_level, RiskLevel::L1);
        // A prohibited host is L3.
        let prohibited =
            policy_with_tools(|v| v["prohibited_hosts"] = json!(["hooks.example.com"]));
        let a = assess(&p, &prohibited);
        assert!(a.forbidden && a.risk_level == RiskLevel::L3);
        // L1 made approval-required.
        let strict = policy_with_tools(|v| v["levels"]["L1"]["approval"] = json!("required"));
        let l1 = plan(vec![step(
            "c",
            "noema.put_canonical",
            json!({}),
            &["ledger:write"],
        )]);
        assert!(assess(&l1, &strict).requires_approval);
        // A tool declared L3 is denied.
        let denied = policy_with_tools(|v| v["tools"]["noema.noop"]["level"] = json!("L3"));
        let noop = plan(vec![step("a", "noema.noop", json!({}), &[])]);
        assert!(assess(&noop, &denied).forbidden);
    }

    #[test]
    fn command_lines_use_the_programs_file_name() {
        assert_eq!(
            command_line("/usr/bin/rm", &["-rf".into(), "x".into()]),
            "rm -rf x"
        );
        assert_eq!(command_line("/usr/bin/true", &[]), "true");
        let policy = RiskPolicy::default_policy().unwrap();
        let matches = |line: &str| policy.patterns().iter().any(|p| p.regex.is_match(line));
        for bad in [
            "rm -rf /",
            "rm x",
            "rmdir d",
            "mkfs.ext4 /dev/sdb",
            "mkfs -t ext4 x",
            "dd if=/dev/zero of=/dev/sda bs=1M",
            "find . -name x -delete",
            "find . -exec rm {} ;",
            "sh -c x",
            "bash",
            "python3 script.py",
            "chmod -R 777 .",
            "chown --recursive u d",
            "git clean -fdx",
            "git reset --hard HEAD~3",
            "git push --force origin main",
            "shutdown -h now",
            "kill -9 1",
        ] {
            assert!(matches(bad), "{bad}");
        }
        for ok in [
            "cp a b",
            "ls -la",
            "dd if=a of=b",
            "grep -r rm .",
            "echo rm -rf",
            "find . -name x",
            "chmod 644 f",
            "git status",
            "git push origin main",
            "shred_report x",
        ] {
            assert!(!matches(ok), "{ok}");
        }
    }
}
