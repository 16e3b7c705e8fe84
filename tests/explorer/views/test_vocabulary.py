"""explorer.views.vocabulary: log-normalisers and next-token log-probabilities read a chunk of the vocabulary at a
time, in parts side by side, equal to the whole projection's log-softmax."""

import pytest
import torch

from explorer.views.vocabulary import log_normalizers, logits, next_token_log_probs


@pytest.mark.parametrize("chunk, bias, workers", [(7, True, 1), (7, False, 1), (1000, True, 1), (7, True, 2),
                                                  (8, False, 3), (1000, True, 2)])
def test_log_normalizers_over_vocabulary_chunks_equal_logsumexp_of_the_whole_projection(chunk, bias, workers):
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=bias).requires_grad_(False)
    streams = torch.randn(9, 16) * 5
    expected = torch.logsumexp(head(streams), -1)
    torch.testing.assert_close(log_normalizers(streams, head, chunk, workers), expected, atol=1e-5, rtol=0)


def test_next_token_log_probs_equal_the_log_softmax_at_the_tokens_that_came_next():
    torch.manual_seed(1)
    head = torch.nn.Linear(24, 300, bias=True).requires_grad_(False)
    streams = torch.randn(3, 11, 24) * 3  # 3 rows (layers, or ablated runs) of 11 positions
    next_ids = torch.randint(0, 300, (11,))
    expected = head(streams).log_softmax(-1).gather(-1, next_ids[None, :, None].expand(3, -1, 1))[..., 0]
    for workers in (1, 2):
        got = next_token_log_probs(streams, head, next_ids, workers)
        assert got.shape == (3, 11)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("chunk, bias", [(7, True), (64, False), (4096, True)])
def test_logits_in_vocabulary_chunks_equal_the_whole_product(chunk, bias):
    torch.manual_seed(2)
    head = torch.nn.Linear(32, 300, bias=bias).requires_grad_(False)
    streams = torch.randn(5, 32)
    torch.testing.assert_close(logits(streams, head, chunk), head(streams), atol=1e-5, rtol=0)
