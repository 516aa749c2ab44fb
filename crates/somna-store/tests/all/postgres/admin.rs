//! A superuser session on the tests' Postgres server, for what the store does not do: changing
//! the server's settings, holding locks, looking at sessions.

use tokio_postgres::NoTls;

/// A superuser session on the tests' server.
pub struct Admin {
    runtime: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Admin {
    pub fn connect(url: &str) -> Admin {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
            tokio::spawn(connection);
            client
        });
        Admin { runtime, client }
    }

    pub fn value(&self, sql: &str) -> String {
        self.runtime
            .block_on(self.client.query_one(sql, &[]))
            .unwrap()
            .get(0)
    }

    /// Runs `statements` one by one (`ALTER SYSTEM` refuses the implicit transaction of a
    /// multi-statement query).
    pub fn run(&self, statements: &[&str]) {
        for sql in statements {
            self.runtime
                .block_on(self.client.batch_execute(sql))
                .unwrap();
        }
    }

    /// Whether the sessions named `application_name` are encrypted (`None`: there is none).
    pub fn encrypted(&self, application_name: &str) -> Option<bool> {
        let rows = self
            .runtime
            .block_on(self.client.query(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                 WHERE a.application_name = $1",
                &[&application_name],
            ))
            .unwrap();
        (!rows.is_empty()).then(|| rows.iter().all(|r| r.get::<_, bool>(0)))
    }
}
