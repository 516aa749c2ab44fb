//! What only the Postgres backend has: reopening a schema, the server's settings and locks, TLS,
//! and the cluster's shard leases, fencing and takeovers. Every test needs `SOMNA_TEST_PG_URL` and
//! reports the skip without it.

mod admin;
mod backend;
mod cluster;
mod tls;
