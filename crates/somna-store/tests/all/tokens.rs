//! API tokens: made with a secret shown once and stored hashed, listed by name, revoked, copied.

use somna_store::tokens::{SECRET_PREFIX, hash_secret};
use somna_store::{Access, Store, StoreError, TokenScope};

use crate::common::*;

on_both_backends!(
    tokens_are_stored_hashed_listed_and_revoked,
    a_token_name_is_taken_until_revoked,
    a_copy_carries_the_tokens,
);

fn scope(agents: &str, access: Access) -> TokenScope {
    TokenScope {
        agents: agents.into(),
        access,
    }
}

fn tokens_are_stored_hashed_listed_and_revoked() {
    let store = temporary_store!();
    assert!(store.tokens().unwrap().is_empty());
    let (made, secret) = store
        .create_token("tenant-b", scope("b-", Access::Read), NOW)
        .unwrap();
    let (_, other) = store
        .create_token("tenant-a", scope("a-", Access::ReadWrite), NOW)
        .unwrap();
    assert!(secret.starts_with(SECRET_PREFIX));
    assert_ne!(secret, other);
    // Only the hash is kept: the secret appears in no stored field.
    assert_eq!(made.hash, hash_secret(&secret));
    let listed = store.tokens().unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["tenant-a", "tenant-b"]);
    assert_eq!(listed[1], made);
    assert!(!format!("{listed:?}").contains(&secret[SECRET_PREFIX.len()..]));

    assert!(store.revoke_token("tenant-b").unwrap());
    assert!(!store.revoke_token("tenant-b").unwrap());
    let names: Vec<String> = store
        .tokens()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["tenant-a"]);
}

fn a_token_name_is_taken_until_revoked() {
    let store = temporary_store!();
    store
        .create_token("game-1", scope("g1-", Access::Read), NOW)
        .unwrap();
    let again = store.create_token("game-1", scope("g1-", Access::ReadWrite), NOW);
    assert!(
        matches!(&again, Err(StoreError::TokenExists(name)) if name == "game-1"),
        "{again:?}"
    );
    // Malformed names and scopes are refused with what is wrong.
    let bad = store.create_token("a b", scope("g1-", Access::Read), NOW);
    assert!(
        bad.as_ref()
            .is_err_and(|e| e.to_string().contains("token name")),
        "{bad:?}"
    );
    let bad = store.create_token("all", scope("", Access::Read), NOW);
    assert!(
        bad.as_ref()
            .is_err_and(|e| e.to_string().contains("admin token")),
        "{bad:?}"
    );
    assert!(store.revoke_token("game-1").unwrap());
    store
        .create_token("game-1", scope("g1-", Access::ReadWrite), NOW)
        .unwrap();
}

fn a_copy_carries_the_tokens() {
    let store = temporary_store!();
    let (made, _) = store
        .create_token("t", scope("x-", Access::Read), NOW)
        .unwrap();
    let dest = Store::temporary().unwrap();
    store.copy_into(&dest).unwrap();
    assert_eq!(dest.tokens().unwrap(), vec![made]);
}
