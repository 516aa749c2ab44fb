//! Distills a sentence-transformer into the static token table the builtin embedder reads
//! (model2vec's method): every vocabulary token is run alone through the model, the embeddings
//! are reduced by PCA to `DIMS` components, and each token's row is stored as `i8` with its own
//! scale, beside its text.
//!
//! ```text
//! cargo run --release -p somna-embed --features candle --example distill -- \
//!     ~/.cache/somna-embedder/all-MiniLM-L6-v2 crates/somna-embed/assets/minilm-static.bin [DIMS]
//! ```
//!
//! The output format is `somna_embed::StaticEmbedder`'s (see `static_table.rs`).
// A command-line tool that reports on stderr; the Jacobi rotations read best as index loops.
#![allow(clippy::print_stderr, clippy::needless_range_loop)]

use std::io::Write;
use std::path::PathBuf;

use somna_embed::LocalEmbedder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: distill MODEL_DIR OUT_FILE [DIMS]";
    let dir = PathBuf::from(args.next().ok_or(usage)?);
    let out = PathBuf::from(args.next().ok_or(usage)?);
    let dims: usize = args.next().map(|d| d.parse()).transpose()?.unwrap_or(128);

    let model = LocalEmbedder::load(&dir)?;
    let started = std::time::Instant::now();
    let vocab = model.embed_vocabulary()?;
    eprintln!(
        "distill: {} tokens embedded in {:.1} s",
        vocab.len(),
        started.elapsed().as_secs_f64()
    );
    let width = vocab.first().map_or(0, |(_, v)| v.len());
    if dims == 0 || dims > width {
        return Err(format!("DIMS must be 1..={width}").into());
    }

    let rows: Vec<Vec<f64>> = vocab
        .iter()
        .map(|(_, v)| v.iter().map(|&x| f64::from(x)).collect())
        .collect();
    let mean = column_mean(&rows);
    let components = principal_components(&rows, &mean, dims);

    let mut file = std::io::BufWriter::new(std::fs::File::create(&out)?);
    file.write_all(somna_embed::STATIC_MAGIC)?;
    file.write_all(&u32::try_from(vocab.len())?.to_le_bytes())?;
    file.write_all(&u32::try_from(dims)?.to_le_bytes())?;
    for ((token, _), row) in vocab.iter().zip(&rows) {
        let projected: Vec<f64> = components
            .iter()
            .map(|c| {
                c.iter()
                    .zip(row)
                    .zip(&mean)
                    .map(|((a, x), m)| a * (x - m))
                    .sum()
            })
            .collect();
        let max = projected.iter().fold(0f64, |m, x| m.max(x.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
        file.write_all(&u16::try_from(token.len())?.to_le_bytes())?;
        file.write_all(token.as_bytes())?;
        #[allow(clippy::cast_possible_truncation)]
        file.write_all(&(scale as f32).to_le_bytes())?;
        for x in &projected {
            #[allow(clippy::cast_possible_truncation)]
            let q = (x / scale).round().clamp(-127.0, 127.0) as i8;
            file.write_all(&q.to_le_bytes())?;
        }
    }
    file.flush()?;
    eprintln!("distill: wrote {} ({dims} dims)", out.display());
    Ok(())
}

fn column_mean(rows: &[Vec<f64>]) -> Vec<f64> {
    let width = rows[0].len();
    let mut mean = vec![0.0; width];
    for row in rows {
        for (m, x) in mean.iter_mut().zip(row) {
            *m += x;
        }
    }
    #[allow(clippy::cast_precision_loss)]
    let n = rows.len() as f64;
    mean.iter_mut().for_each(|m| *m /= n);
    mean
}

/// The `k` leading eigenvectors of the rows' covariance (about their `mean`), largest eigenvalue
/// first (cyclic Jacobi rotations on the symmetric covariance matrix).
fn principal_components(rows: &[Vec<f64>], mean: &[f64], k: usize) -> Vec<Vec<f64>> {
    let n = rows[0].len();
    let mut a = vec![vec![0.0; n]; n];
    for row in rows {
        let centered: Vec<f64> = row.iter().zip(mean).map(|(x, m)| x - m).collect();
        for i in 0..n {
            let ci = centered[i];
            for j in i..n {
                a[i][j] += ci * centered[j];
            }
        }
    }
    for i in 0..n {
        for j in 0..i {
            a[i][j] = a[j][i];
        }
    }
    let mut v = vec![vec![0.0; n]; n];
    for (i, row) in v.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for _sweep in 0..60 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i][j] * a[i][j])
            .sum();
        if off < 1e-18 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if a[p][q].abs() < 1e-30 {
                    continue;
                }
                let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for r in 0..n {
                    let (arp, arq) = (a[r][p], a[r][q]);
                    a[r][p] = c * arp - s * arq;
                    a[r][q] = s * arp + c * arq;
                }
                for r in 0..n {
                    let (apr, aqr) = (a[p][r], a[q][r]);
                    a[p][r] = c * apr - s * aqr;
                    a[q][r] = s * apr + c * aqr;
                }
                for row in &mut v {
                    let (vp, vq) = (row[p], row[q]);
                    row[p] = c * vp - s * vq;
                    row[q] = s * vp + c * vq;
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&x, &y| a[y][y].total_cmp(&a[x][x]));
    order
        .into_iter()
        .take(k)
        .map(|col| v.iter().map(|row| row[col]).collect())
        .collect()
}
