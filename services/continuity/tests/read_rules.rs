//! Read-side derivations checked against the original's own functions.
//!
//! `tests/fixtures/read_rules.json` was recorded by calling CogniRelay 1.4.15's
//! `_build_trust_signals`, `_build_compact_trust_signals`, `_build_aggregate_trust_signals`,
//! `_build_startup_summary`, `_capsule_list_summary`, `_salience_sort` and `_compare_capsules`
//! (CPython 3.12) on the capsules and instants it contains.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use noema_continuity::domain::json::{Json, to_py_json};
use noema_continuity::domain::listing::{ListRow, PreparedRow, list_body, list_response};
use noema_continuity::domain::model::Capsule;
use noema_continuity::domain::read::{ReadOutcome, read_body, read_response};
use noema_continuity::domain::request::ListRequest;
use noema_continuity::domain::timestamp::parse_iso;
use noema_continuity::domain::trust::{
    SignalSummary, SourceState, aggregate_trust_signals, compact_trust_signals, startup_summary,
    trust_signals,
};
use noema_continuity::domain::verify::compare_capsules;

fn fixture() -> Json {
    let path = format!(
        "{}/tests/fixtures/read_rules.json",
        env!("CARGO_MANIFEST_DIR")
    );
    Json::parse(std::fs::read_to_string(path).unwrap().as_bytes()).unwrap()
}

fn capsule(json: &Json) -> Capsule {
    Capsule::from_json_at(json, &Default::default()).unwrap()
}

fn state(text: &str) -> SourceState {
    match text {
        "active" => SourceState::Active,
        "fallback" => SourceState::Fallback,
        _ => SourceState::Missing,
    }
}

fn items(json: &Json, key: &str) -> Vec<Json> {
    json.get(key).and_then(Json::as_array).cloned().unwrap()
}

/// Every phase boundary: ≤ S fresh, ≤ 1.5 S stale_soft, ≤ 2 S stale_hard, else
/// expired_by_age; class defaults; persistent never stale; `expires_at` strictly after; the
/// 1970 legacy floor.
#[test]
fn trust_signals_pin_every_phase_boundary() {
    let cases = items(&fixture(), "phase");
    assert!(cases.len() > 50);
    for case in cases {
        let c = capsule(case.get("capsule").unwrap());
        let now = parse_iso(case.get("now").unwrap().as_str().unwrap()).unwrap();
        let source = case
            .get("signals")
            .unwrap()
            .get("integrity")
            .unwrap()
            .get("source_state")
            .unwrap();
        let got = trust_signals(&c, now, state(source.as_str().unwrap()), &[]);
        assert_eq!(
            to_py_json(&got),
            to_py_json(case.get("signals").unwrap()),
            "now {:?}, freshness {:?}",
            case.get("now"),
            c.freshness
        );
    }
}

#[test]
fn full_and_compact_signals_match() {
    for case in items(&fixture(), "signals") {
        let c = capsule(case.get("capsule").unwrap());
        let now = parse_iso(case.get("now").unwrap().as_str().unwrap()).unwrap();
        assert_eq!(
            to_py_json(&trust_signals(&c, now, SourceState::Active, &[])),
            to_py_json(case.get("signals").unwrap())
        );
        assert_eq!(
            to_py_json(&compact_trust_signals(&c, now, SourceState::Fallback, true)),
            to_py_json(case.get("compact").unwrap())
        );
    }
}

#[test]
fn aggregate_signals_mix_full_and_compact_forms() {
    let fixture = fixture();
    let aggregate = fixture.get("aggregate").unwrap();
    let full = aggregate.get("input_full").unwrap();
    let compact = aggregate.get("input_compact").unwrap();
    let c = capsule(items(&fixture, "signals")[0].get("capsule").unwrap());
    let now = parse_iso(
        items(&fixture, "signals")[0]
            .get("now")
            .unwrap()
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        to_py_json(&trust_signals(&c, now, SourceState::Active, &[])),
        to_py_json(full)
    );
    // The recorded third input is the full active block of the plain default capsule (user
    // "u") at the same instant; the startup fixture's task capsule has the same content.
    let plain_capsule = capsule(items(&fixture, "startup")[1].get("capsule").unwrap());
    let mut plain_user = plain_capsule.clone();
    plain_user.subject_kind = noema_continuity::domain::model::SubjectKind::User;
    plain_user.subject_id = "u".into();
    let third = trust_signals(&plain_user, now, SourceState::Active, &[]);
    let summaries: Vec<SignalSummary> = [full.clone(), compact.clone(), third]
        .iter()
        .map(|s| SignalSummary::from_signals(s).unwrap())
        .collect();
    let got = aggregate_trust_signals(&summaries, 4, 3, 1).unwrap();
    assert_eq!(
        to_py_json(&got),
        to_py_json(aggregate.get("result").unwrap())
    );
    assert_eq!(aggregate_trust_signals(&[], 1, 0, 1), None);
}

#[test]
fn startup_summary_tiers_match() {
    for case in items(&fixture(), "startup") {
        let c = case.get("capsule").filter(|c| !c.is_null()).map(capsule);
        let now = parse_iso(case.get("now").unwrap().as_str().unwrap()).unwrap();
        let source = state(case.get("source_state").unwrap().as_str().unwrap());
        let warnings: Vec<String> = items(&case, "recovery_warnings")
            .iter()
            .map(|w| w.as_str().unwrap().to_owned())
            .collect();
        let signals = c
            .as_ref()
            .map_or(Json::Null, |c| trust_signals(c, now, source, &[]));
        let got = startup_summary(c.as_ref(), source, &warnings, &signals);
        assert_eq!(to_py_json(&got), to_py_json(case.get("summary").unwrap()));
    }
}

/// Rows as the original builds them, then the §8.1 order including every tie-breaker:
/// lifecycle, health, phase, resume adequacy, verification strength, floored age, kind, id.
#[test]
fn salience_orders_list_rows_like_the_original() {
    let fixture = fixture();
    let salience = fixture.get("salience").unwrap();
    let now = parse_iso(salience.get("now").unwrap().as_str().unwrap()).unwrap();
    let mut rows = Vec::new();
    for item in items(salience, "rows") {
        let c = capsule(item.get("capsule").unwrap());
        let path = item
            .get("row")
            .unwrap()
            .get("path")
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned();
        let row = ListRow::active(&c, &path, now);
        assert_eq!(
            to_py_json(&Json::Object(row.json.clone())),
            to_py_json(item.get("row").unwrap()),
            "row of {path}"
        );
        rows.push(row);
    }
    let request =
        ListRequest::from_json(&Json::parse(br#"{"sort":"salience","limit":200}"#).unwrap())
            .unwrap();
    let body = list_response(&request, rows);
    let got: Vec<(String, String, i64)> = items(&body, "capsules")
        .iter()
        .map(|r| {
            (
                r.get("subject_kind").unwrap().as_str().unwrap().to_owned(),
                r.get("subject_id").unwrap().as_str().unwrap().to_owned(),
                match r.get("salience_rank").unwrap() {
                    Json::Number(n) => n.as_i64().unwrap(),
                    _ => -1,
                },
            )
        })
        .collect();
    let want: Vec<(String, String, i64)> = items(salience, "order")
        .iter()
        .enumerate()
        .map(|(i, pair)| {
            let pair = pair.as_array().unwrap();
            (
                pair[0].as_str().unwrap().to_owned(),
                pair[1].as_str().unwrap().to_owned(),
                i as i64 + 1,
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(body.get("unique_match"), Some(&Json::Bool(false)));
}

/// Rows prepared once and listed later give the bytes of rows built at the list's time, for
/// both orders, limits, a thread filter and fallback rows, across phase boundaries.
#[test]
fn prepared_rows_list_the_same_bytes_as_rows_built_at_list_time() {
    let fixture = fixture();
    let salience = fixture.get("salience").unwrap();
    let prepared_at = parse_iso(salience.get("now").unwrap().as_str().unwrap()).unwrap();
    let capsules: Vec<(Capsule, String)> = items(salience, "rows")
        .iter()
        .map(|item| {
            let row = item.get("row").unwrap();
            let path = row.get("path").unwrap().as_str().unwrap().to_owned();
            (capsule(item.get("capsule").unwrap()), path)
        })
        .collect();
    let build = |now| {
        let mut rows = Vec::new();
        for (i, (c, path)) in capsules.iter().enumerate() {
            rows.push(ListRow::active(c, path, now));
            if i % 3 == 0 {
                rows.push(ListRow::fallback(c, &format!("{path}.fallback"), now));
            }
        }
        rows
    };
    let prepared: Vec<PreparedRow> = {
        let mut rows = Vec::new();
        for (i, (c, path)) in capsules.iter().enumerate() {
            rows.push(PreparedRow::of_capsule(
                &ListRow::active(c, path, prepared_at),
                c,
            ));
            if i % 3 == 0 {
                let fallback = ListRow::fallback(c, &format!("{path}.fallback"), prepared_at);
                rows.push(PreparedRow::of_capsule(&fallback, c));
            }
        }
        rows
    };
    let prepared: Vec<&PreparedRow> = prepared.iter().collect();
    let requests = [
        r#"{"sort":"salience","limit":200}"#,
        r#"{"sort":"salience","limit":4}"#,
        r#"{"limit":200}"#,
        r#"{"limit":3}"#,
        r#"{"sort":"salience","limit":50,"lifecycle":"active"}"#,
    ];
    for days in [0, 1, 4, 20, 40, 200, 400, 1000] {
        let now = prepared_at + time::Duration::days(days) + time::Duration::seconds(days * 37);
        for request in requests {
            let request =
                ListRequest::from_json(&Json::parse(request.as_bytes()).unwrap()).unwrap();
            let want = to_py_json(&list_response(&request, build(now)));
            let got = String::from_utf8(list_body(&request, &prepared, now)).unwrap();
            assert_eq!(got, want, "{request:?} at +{days} days");
        }
    }
}

/// A read answered with the capsule's JSON serialised beforehand gives the bytes of the
/// answer built whole, for every source state a capsule can come from.
#[test]
fn read_body_with_a_serialised_capsule_is_the_whole_answer() {
    let fixture = fixture();
    let salience = fixture.get("salience").unwrap();
    let now = parse_iso(salience.get("now").unwrap().as_str().unwrap()).unwrap();
    for item in items(salience, "rows") {
        let c = capsule(item.get("capsule").unwrap());
        let json = to_py_json(&c.to_json());
        for (source, warnings) in [
            (SourceState::Active, vec![]),
            (
                SourceState::Fallback,
                vec![
                    "continuity_active_missing".to_owned(),
                    "continuity_fallback_used".to_owned(),
                ],
            ),
        ] {
            let outcome = ReadOutcome {
                path: "memory/continuity/x.json".to_owned(),
                capsule: Some(Arc::new(c.clone())),
                source_state: source,
                recovery_warnings: warnings,
            };
            let want = to_py_json(&read_response(&outcome, now, None));
            let got = String::from_utf8(read_body(&outcome, now, None, Some(&json))).unwrap();
            assert_eq!(got, want);
        }
    }
}

#[test]
fn compare_reports_the_original_changed_fields() {
    for case in items(&fixture(), "compare") {
        let active = case.get("active").unwrap().to_value();
        let candidate = case.get("candidate").unwrap().to_value();
        let got: Vec<Json> = compare_capsules(&active, &candidate)
            .into_iter()
            .map(Json::String)
            .collect();
        assert_eq!(Json::Array(got), case.get("changed").cloned().unwrap());
    }
}
