//! The web console (`/console`): a page for people who run agents, served by the API on the same
//! port with the same token.
//!
//! The shell (`/console`, its script and stylesheet) is static and holds no data, so it loads
//! without the token; the script then asks for it once (kept in the browser's session storage)
//! when the server has one. Everything it shows comes from token-checked routes: HTML fragments
//! under `/console/f/…`, rendered here with `maud` (the agents table — sorted, filtered and paged on
//! the server, so 10,000 agents cost one page of rows —, an agent's page, its usage chart drawn by
//! `plotters` from the event log), and the JSON API for actions and the live SSE streams. No
//! JavaScript library and no build step: the script is plain browser JavaScript that swaps
//! fragments in and reads the SSE streams.

mod chart;
mod pages;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, ContentType};
use actix_web::{HttpRequest, HttpResponse, web};

use crate::error::ApiError;
use crate::routes::{Reply, State, path_agent};

/// The shell page, its script and stylesheet: public (they hold no data).
const INDEX: &str = include_str!("../../console/index.html");
const SCRIPT: &str = include_str!("../../console/app.js");
const STYLE: &str = include_str!("../../console/app.css");

/// The paths anyone may load: the console's static shell.
pub(crate) fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/console" | "/console/" | "/console/app.js" | "/console/app.css"
    )
}

/// Registers the console's routes.
pub(crate) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/console").route(web::get().to(index)))
        .service(web::resource("/console/").route(web::get().to(index)))
        .service(web::resource("/console/app.js").route(web::get().to(script)))
        .service(web::resource("/console/app.css").route(web::get().to(style)))
        .service(web::resource("/console/f/agents").route(web::get().to(pages::agents)))
        .service(web::resource("/console/f/agents/{id}").route(web::get().to(pages::agent)))
        .service(web::resource("/console/f/agents/{id}/chart").route(web::get().to(pages::chart)))
        .service(
            web::resource("/console/f/agents/{id}/history").route(web::get().to(pages::history)),
        )
        .service(
            web::resource("/console/f/agents/{id}/archive").route(web::get().to(pages::archive)),
        )
        .service(
            web::resource("/console/f/agents/{id}/journal").route(web::get().to(pages::journal)),
        )
        .service(web::resource("/console/f/agents/{id}/facts").route(web::get().to(pages::facts)))
        .service(
            web::resource("/console/f/agents/{id}/prompt").route(web::get().to(pages::prompt)),
        );
}

fn asset(body: &'static str, content_type: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, content_type))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(body)
}

async fn index() -> HttpResponse {
    asset(INDEX, "text/html; charset=utf-8")
}

async fn script() -> HttpResponse {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

async fn style() -> HttpResponse {
    asset(STYLE, "text/css; charset=utf-8")
}

/// An HTML fragment.
fn html(markup: maud::Markup) -> Reply {
    Ok(HttpResponse::build(StatusCode::OK)
        .insert_header(ContentType::html())
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(markup.into_string()))
}

/// The agent a fragment request names, known to the store.
fn agent_of(state: &State, req: &HttpRequest) -> Result<somna_core::AgentId, ApiError> {
    let id = path_agent(req)?;
    crate::routes::known_agent(state, &id)?;
    Ok(id)
}
