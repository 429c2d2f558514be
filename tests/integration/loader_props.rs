//! Property tests for the fleet loader: whatever bytes a fleet repo holds, loading returns a
//! fleet or diagnostics that point inside the file — it never panics or hangs.

use fleetform::fleet::{self, FleetFile};
use proptest::prelude::*;

const EXAMPLE_SPOKES: &str = include_str!("../../examples/fleet-repo/spokes/edge.yaml");
const EXAMPLE_ADDONS: &str = include_str!("../../examples/fleet-repo/addons/addons.yaml");
const EXAMPLE_HUB: &str = include_str!("../../examples/fleet-repo/hubs/hub.yaml");

fn load_one(path: &str, content: Vec<u8>) -> Result<fleet::Fleet, Vec<fleet::Diagnostic>> {
    fleet::load(&[FleetFile {
        path: path.to_string(),
        content,
    }])
}

fn check_positions(content: &[u8], result: &Result<fleet::Fleet, Vec<fleet::Diagnostic>>) {
    // Line breaks as YAML counts them: LF, CRLF, and a CR alone.
    let breaks = content
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'\n' || (b == b'\r' && content.get(i + 1) != Some(&b'\n')))
        .count();
    let lines = breaks + 2;
    if let Err(diagnostics) = result {
        assert!(!diagnostics.is_empty());
        for diagnostic in diagnostics {
            assert!(
                diagnostic.line >= 1 && diagnostic.line <= lines,
                "{diagnostic} (file has {lines} lines)"
            );
            assert!(diagnostic.column >= 1, "{diagnostic}");
            assert!(!diagnostic.message.is_empty());
        }
    }
}

/// Text built from YAML's structural characters, so the parser's odd corners get exercised.
fn yamlish() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("\n".to_string()),
            Just("  ".to_string()),
            Just("- ".to_string()),
            Just(": ".to_string()),
            Just("---\n".to_string()),
            Just("&a ".to_string()),
            Just("*a".to_string()),
            Just("[".to_string()),
            Just("]".to_string()),
            Just("{".to_string()),
            Just("}".to_string()),
            Just("? ".to_string()),
            Just("!!str ".to_string()),
            Just("|\n".to_string()),
            Just("'".to_string()),
            Just("\"".to_string()),
            Just("#".to_string()),
            Just("apiVersion: fleetform.io/v1alpha1\n".to_string()),
            Just("kind: Spoke\n".to_string()),
            Just("metadata:\n  name: x\n".to_string()),
            "[a-zA-Z0-9]{1,8}",
        ],
        0..64,
    )
    .prop_map(|parts| parts.concat())
}

/// One of the example documents with a random slice replaced by random text.
fn mutated_example() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![
            Just(EXAMPLE_SPOKES),
            Just(EXAMPLE_ADDONS),
            Just(EXAMPLE_HUB)
        ],
        any::<prop::sample::Index>(),
        0usize..40,
        prop::collection::vec(any::<u8>(), 0..12),
    )
        .prop_map(|(text, at, len, insert)| {
            let bytes = text.as_bytes();
            let start = at.index(bytes.len());
            let end = (start + len).min(bytes.len());
            let mut out = bytes[..start].to_vec();
            out.extend(insert);
            out.extend(&bytes[end..]);
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(content in prop::collection::vec(any::<u8>(), 0..512)) {
        let result = load_one("a.yaml", content.clone());
        check_positions(&content, &result);
    }

    #[test]
    fn yaml_like_text_never_panics(text in yamlish()) {
        let result = load_one("a.yaml", text.clone().into_bytes());
        check_positions(text.as_bytes(), &result);
    }

    #[test]
    fn mutated_examples_load_or_explain_where(content in mutated_example()) {
        let result = load_one("spokes/edge.yaml", content.clone());
        check_positions(&content, &result);
    }
}
