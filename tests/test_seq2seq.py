"""The GRU encoder–decoder: shapes, padding, d2l's reference, and that it can learn."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attn_utils.data import load_translation_data
from attn_utils.registry import build_model
from attn_utils.seq2seq import (
    Decoder,
    EncoderDecoder,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    make_seq2seq,
)

V_SRC, V_TGT, E, H, L = 11, 13, 8, 16, 2


pytestmark = pytest.mark.usefixtures("one_thread")


def _d2l_decoder_forward(d2l_rnn, embedding, dense, X, state):
    """d2l's ``Seq2SeqDecoder.forward`` (from the book; d2l 1.0.3's torch.py does not ship it)."""
    embs = embedding(X.t().type(torch.int32))
    enc_output, hidden_state = state
    context = enc_output[-1].repeat(embs.shape[0], 1, 1)
    outputs, hidden_state = d2l_rnn(torch.cat((embs, context), -1), hidden_state)
    return dense(outputs).swapaxes(0, 1), [enc_output, hidden_state]


def test_shapes_with_padding():
    torch.manual_seed(0)
    model = make_seq2seq(V_SRC, V_TGT, E, H, L)
    src = torch.tensor([[4, 5, 6, 2, 0], [7, 2, 0, 0, 0], [4, 4, 4, 4, 2]])
    valid = torch.tensor([4, 2, 5])
    outputs, state = model.encoder(src, valid)
    assert outputs.shape == (5, 3, H) and state.shape == (L, 3, H)
    assert torch.all(outputs[2:, 1] == 0)  # padded positions of the second sentence
    dec_in = torch.tensor([[1, 4, 5, 0], [1, 6, 0, 0], [1, 4, 4, 4]])
    assert model(src, dec_in, valid).shape == (3, 4, V_TGT)
    # Padding does not change a sentence's encoding: each row equals the row encoded alone.
    for b in range(3):
        alone_out, alone_state = model.encoder(src[b:b + 1, :valid[b]])
        torch.testing.assert_close(state[:, b], alone_state[:, 0])
        torch.testing.assert_close(outputs[:valid[b], b], alone_out[:, 0])


def test_bad_inputs_raise_value_errors():
    model = make_seq2seq(V_SRC, V_TGT, E, H, L)
    with pytest.raises(ValueError, match="integer tensor"):
        model.encoder(torch.rand(2, 3))
    with pytest.raises(ValueError, match="valid_lens must have shape"):
        model.encoder(torch.ones(2, 3, dtype=torch.long), torch.tensor([3]))
    with pytest.raises(ValueError, match="1..3"):
        model.encoder(torch.ones(2, 3, dtype=torch.long), torch.tensor([3, 0]))
    with pytest.raises(ValueError, match="kind"):
        build_model({"kind": "nope"})


def test_encoder_matches_d2l(d2l):
    torch.manual_seed(0)
    ours = Seq2SeqEncoder(V_SRC, E, H, L)
    ref = d2l.Seq2SeqEncoder(V_SRC, E, H, L)
    ref.embedding.load_state_dict(ours.embedding.state_dict())
    ref.rnn.rnn.load_state_dict(ours.rnn.state_dict())
    X = torch.randint(0, V_SRC, (4, 7))
    out, state = ours(X)
    ref_out, ref_state = ref(X)
    assert out.shape == ref_out.shape == (7, 4, H) and state.shape == ref_state.shape == (L, 4, H)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(state, ref_state)


def test_decoder_matches_d2l(d2l):
    torch.manual_seed(0)
    enc = d2l.Seq2SeqEncoder(V_SRC, E, H, L)
    ours = Seq2SeqDecoder(V_TGT, E, H, L)
    d2l_rnn = d2l.GRU(E + H, H, L)
    d2l_rnn.rnn.load_state_dict(ours.rnn.state_dict())
    X, Y = torch.randint(0, V_SRC, (4, 7)), torch.randint(0, V_TGT, (4, 5))
    enc_all = enc(X)
    logits, (context, hidden) = ours(Y, ours.init_state(enc_all))
    ref_logits, (_, ref_hidden) = _d2l_decoder_forward(d2l_rnn, ours.embedding, ours.dense, Y, list(enc_all))
    assert logits.shape == ref_logits.shape == (4, 5, V_TGT)
    torch.testing.assert_close(logits, ref_logits)
    torch.testing.assert_close(hidden, ref_hidden)
    torch.testing.assert_close(context, enc_all[0][-1])  # the context is the last layer's final state


def test_step_by_step_equals_whole_sequence():
    """Feeding the decoder one token at a time gives the logits of one teacher-forced call."""
    torch.manual_seed(0)
    model = make_seq2seq(V_SRC, V_TGT, E, H, L)
    src, dec_in = torch.randint(4, V_SRC, (3, 6)), torch.randint(4, V_TGT, (3, 5))
    whole = model(src, dec_in)
    state = model.decoder.init_state(model.encoder(src))
    steps = []
    for t in range(5):
        logits, state = model.decoder(dec_in[:, t:t + 1], state)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), whole)


def test_reorder_state_and_interface():
    dec = Seq2SeqDecoder(V_TGT, E, H, L)
    state = (torch.arange(3.0)[:, None].expand(3, H), torch.arange(3.0)[None, :, None].expand(L, 3, H))
    picked = dec.reorder_state(state, torch.tensor([2, 2, 0]))
    assert picked[0][:, 0].tolist() == [2, 2, 0] and picked[1][1, :, 0].tolist() == [2, 2, 0]
    assert dec.attention_weights is None
    with pytest.raises(ValueError, match="state_batch_dims"):
        dec.reorder_state(state[:1], torch.tensor([0]))
    assert issubclass(Seq2SeqDecoder, Decoder) and isinstance(make_seq2seq(5, 5, 2, 2, 1), EncoderDecoder)


def test_overfit_eight_grammar_pairs():
    """The model memorises 8 pairs of the bundled grammar corpus: exact match after a few hundred steps."""
    from attn_utils.decoding import greedy_decode
    from attn_utils.losses import sequence_loss
    from attn_utils.trainers import trim_batch

    torch.manual_seed(0)
    data = load_translation_data("grammar", num_train=8, min_freq=1, verbose=False)
    model = make_seq2seq(len(data.src_vocab), len(data.tgt_vocab), 32, 64, 1)
    src, dec_in, valid, label = trim_batch(data.arrays("train"), pad=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    # Far from the edge: over seeds 0-7 the greedy output is exact from step 10-20 on (checked every 10 steps to
    # 300) and the loss at step 150 is 4e-4-6e-4 (3.5 at the start). A broken model or loss never gets there.
    for _ in range(150):
        loss = sequence_loss(model(src, dec_in, valid), label)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    out = greedy_decode(model, src, valid, data.tgt_vocab.bos, data.tgt_vocab.eos, max_len=20)
    assert [data.tgt_vocab.to_tokens(t) for t in out.tokens] == data.train.tgt


def test_predict_step_is_d2ls_greedy_loop():
    """d2l's ``predict_step`` runs a fixed number of greedy steps; up to <eos> it equals greedy_decode."""
    from attn_utils.decoding import greedy_decode

    torch.manual_seed(0)
    model = make_seq2seq(V_SRC, V_TGT, E, H, L).eval()
    src, valid = torch.randint(4, V_SRC, (4, 5)), torch.tensor([5, 5, 3, 2])
    tgt = torch.full((4, 6), 1)  # <bos> first
    tokens, weights = model.predict_step((src, tgt, valid, None), "cpu", num_steps=6)
    assert tokens.shape == (4, 6) and weights == []
    greedy = greedy_decode(model, src, valid, bos=1, eos=2, max_len=6)
    for row, decoded in zip(tokens.tolist(), greedy.tokens):
        assert row[:len(decoded)] == decoded
