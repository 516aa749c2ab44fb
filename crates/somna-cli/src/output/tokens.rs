//! `somna token …`: scoped API tokens as text or JSON.

use somna_server::{CreatedToken, TokenList};

use super::Out;

impl Out {
    /// A new token and its secret (shown this once).
    pub fn token_created(&self, created: &CreatedToken) {
        if self.is_json() {
            self.value(created);
            return;
        }
        let info = &created.info;
        println!(
            "token {:?}: {} of the agents whose id starts with {:?}",
            info.name,
            match info.access {
                somna_store::Access::Read => "reads",
                somna_store::Access::ReadWrite => "reads and commands",
            },
            info.agents
        );
        println!("{}", created.token);
        eprintln!("(shown once: the database keeps only its SHA-256)");
    }

    /// The scoped tokens.
    pub fn tokens(&self, list: &TokenList) {
        if self.is_json() {
            self.value(list);
            return;
        }
        if list.tokens.is_empty() {
            println!("no tokens");
            return;
        }
        println!("{:<24} {:<24} {:<11} made", "token", "agents", "access");
        for t in &list.tokens {
            println!(
                "{:<24} {:<24} {:<11} {}",
                t.name,
                t.agents,
                t.access.as_str(),
                t.created_at
            );
        }
    }

    /// A revoked token.
    pub fn token_revoked(&self, name: &str) {
        if self.is_json() {
            self.value(&serde_json::json!({ "revoked": name }));
        } else {
            println!("token {name:?} revoked");
        }
    }
}
