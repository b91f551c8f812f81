//! The parameter tensors of a transformer encoder, as LAMB sees them: one update per
//! tensor, each with its own weight and update norms (dissertation 6.3).

use std::fmt;

/// One parameter tensor.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TensorSpec {
    /// Name, e.g. `layer3.attn.q.weight`.
    pub name: String,
    /// Shape (row-major).
    pub shape: Vec<u64>,
}

impl TensorSpec {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// A BERT-style model: embeddings, `layers` encoder layers, pooler and the masked-LM head
/// transform (the decoder weight is tied to the word embedding).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelPreset {
    /// Preset name.
    pub name: String,
    /// Encoder layers.
    pub layers: u32,
    /// Hidden size.
    pub d_model: u64,
    /// Feed-forward size.
    pub d_ff: u64,
    /// Vocabulary size.
    pub vocab: u64,
    /// Maximum sequence length (position embeddings).
    pub max_positions: u64,
}

/// A preset name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownModel(pub String);

impl fmt::Display for UnknownModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown model preset `{}` (known: {})",
            self.0,
            ModelPreset::NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownModel {}

impl ModelPreset {
    /// Built-in preset names.
    pub const NAMES: [&'static str; 3] = ["bert-large", "bert-base", "megatron-bert"];

    /// A built-in preset. `megatron-bert` is BERT-Large with twice the hidden size (the
    /// dissertation's config C3, "2x d_model").
    ///
    /// # Errors
    /// [`UnknownModel`] for any other name.
    pub fn builtin(name: &str) -> Result<Self, UnknownModel> {
        let (layers, d_model) = match name {
            "bert-large" => (24, 1024),
            "bert-base" => (12, 768),
            "megatron-bert" => (24, 2048),
            _ => return Err(UnknownModel(name.to_string())),
        };
        Ok(Self::custom(name, layers, d_model, 4 * d_model))
    }

    /// A model of the BERT family with the given sizes (vocabulary 30522, 512 positions).
    pub fn custom(name: &str, layers: u32, d_model: u64, d_ff: u64) -> Self {
        Self {
            name: name.to_string(),
            layers,
            d_model,
            d_ff,
            vocab: 30522,
            max_positions: 512,
        }
    }

    /// Every parameter tensor, in the order LAMB visits them.
    pub fn tensors(&self) -> Vec<TensorSpec> {
        let (d, f) = (self.d_model, self.d_ff);
        let mut out = Vec::new();
        let mut push = |name: String, shape: &[u64]| {
            out.push(TensorSpec {
                name,
                shape: shape.to_vec(),
            })
        };
        push("emb.word".into(), &[self.vocab, d]);
        push("emb.position".into(), &[self.max_positions, d]);
        push("emb.token_type".into(), &[2, d]);
        push("emb.ln.gamma".into(), &[d]);
        push("emb.ln.beta".into(), &[d]);
        for l in 0..self.layers {
            for p in ["q", "k", "v", "o"] {
                push(format!("layer{l}.attn.{p}.weight"), &[d, d]);
                push(format!("layer{l}.attn.{p}.bias"), &[d]);
            }
            push(format!("layer{l}.attn.ln.gamma"), &[d]);
            push(format!("layer{l}.attn.ln.beta"), &[d]);
            push(format!("layer{l}.ffn.fc1.weight"), &[f, d]);
            push(format!("layer{l}.ffn.fc1.bias"), &[f]);
            push(format!("layer{l}.ffn.fc2.weight"), &[d, f]);
            push(format!("layer{l}.ffn.fc2.bias"), &[d]);
            push(format!("layer{l}.ffn.ln.gamma"), &[d]);
            push(format!("layer{l}.ffn.ln.beta"), &[d]);
        }
        push("pooler.weight".into(), &[d, d]);
        push("pooler.bias".into(), &[d]);
        push("mlm.transform.weight".into(), &[d, d]);
        push("mlm.transform.bias".into(), &[d]);
        push("mlm.transform.ln.gamma".into(), &[d]);
        push("mlm.transform.ln.beta".into(), &[d]);
        push("mlm.decoder.bias".into(), &[self.vocab]);
        out
    }

    /// Total parameters.
    pub fn parameters(&self) -> u64 {
        self.tensors().iter().map(TensorSpec::elements).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bert_large_has_about_340m_parameters() {
        let m = ModelPreset::builtin("bert-large").unwrap();
        let p = m.parameters();
        // Per layer 4 d^2 + 2 d d_ff + biases and LayerNorms = 12.59 M; x24 = 302 M;
        // embeddings 31.8 M; pooler + MLM head 2.1 M + 30522.
        assert!((330_000_000..345_000_000).contains(&p), "{p}");
        let per_layer = 4 * 1024 * 1024 + 2 * 1024 * 4096 + 4 * 1024 + 4096 + 1024 + 4 * 1024;
        let layers: u64 = m
            .tensors()
            .iter()
            .filter(|t| t.name.starts_with("layer"))
            .map(TensorSpec::elements)
            .sum();
        assert_eq!(layers, 24 * per_layer);
    }

    #[test]
    fn unknown_preset_names_the_choices() {
        let e = ModelPreset::builtin("gpt-5").unwrap_err().to_string();
        assert!(e.contains("gpt-5") && e.contains("bert-large"), "{e}");
    }
}
