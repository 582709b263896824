"""Count-based language models: the baselines a neural language model has to beat.

``KneserNeyLM(order)`` is interpolated Kneser–Ney smoothing (Kneser and Ney, 1995; in the
interpolated form of Chen and Goodman, 1999, with one absolute discount per order):

* highest order, with raw counts ``c``:
  ``P(w | h) = max(c(h w) - D, 0) / c(h) + D * N1+(h .) / c(h) * P(w | h')``, where ``h'`` drops the
  oldest word of ``h`` and ``N1+(h .)`` counts the distinct words seen after ``h``;
* lower orders, with *continuation* counts ``N1+(. h w)`` (the distinct words seen before ``h w``)
  in place of ``c(h w)``: a word that follows many different contexts is a likely continuation of an
  unseen one, however often it occurred;
* the unigram level is interpolated with the uniform distribution over the vocabulary, so every word
  of the vocabulary has a probability above zero.

A context never seen in training hands all of its mass to the next lower order. The discount of
each order is ``D = n1 / (n1 + 2 n2)``, with ``n1`` and ``n2`` the numbers of n-grams of that order
whose (raw or continuation) count is 1 and 2 (Ney, Essen and Kneser, 1994). Sequences are padded
with ``order - 1`` boundary tokens at the start; the boundary token itself is never predicted.

``KneserNeyLM(order, vocab, modified=True)`` is *modified* Kneser–Ney, the strongest method of Chen
and Goodman's comparison (1999; technical report TR-10-98, 1998): three discounts per
order, ``D1``, ``D2`` and ``D3+`` for the n-grams of (raw or continuation) count 1, 2 and 3 or more,

* ``P(w | h) = (c(h w) - D(c(h w))) / c(h) + gamma(h) * P(w | h')``, ``D(0) = 0``;
* ``gamma(h) = (D1 N1(h .) + D2 N2(h .) + D3+ N3+(h .)) / c(h)``, where ``N1(h .)``, ``N2(h .)`` and
  ``N3+(h .)`` count the distinct words seen after ``h`` with count exactly 1, exactly 2 and 3 or more;
* from the count-of-counts ``n1 .. n4`` of the order: ``Y = n1 / (n1 + 2 n2)``,
  ``D1 = 1 - 2 Y n2 / n1``, ``D2 = 2 - 3 Y n3 / n2``, ``D3+ = 3 - 4 Y n4 / n3`` (``D1`` works out
  equal to ``Y``, the single discount before its clamping). The same formulas are in KenLM's
  ``lmplz`` and SRILM's ``make-kn-discounts``.

Everything else (continuation counts below the top order, the uniform distribution below the unigram
level, unseen contexts, the boundary padding) is as in the single-discount model.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence

from .checks import check_positive_int, is_finite_number

BOUNDARY = "<s>"  # the padding before the first token of a sequence (a context, never a target)
_NONE = object()  # "nothing found", where None could be a token


def _check_sequences(sequences, name: str) -> list[list]:
    if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Iterable):
        raise ValueError(f"{name} must be a list of token sequences, got {type(sequences).__name__}")
    sequences = list(sequences)
    bad = next((s for s in sequences if isinstance(s, bytes) or not isinstance(s, Iterable)), _NONE)
    if bad is not _NONE:  # a flat list of tokens, [1, 2, 3], rather than a list of sequences
        raise ValueError(f"{name} must be a list of token sequences (lists of tokens), got an element "
                         f"{type(bad).__name__} {bad!r:.40}; one sequence is [tokens]")
    sequences = [list(s) for s in sequences]
    if not sequences or not any(sequences):
        raise ValueError(f"{name} must hold at least one token, got {len(sequences)} empty sequence(s)")
    return sequences


class KneserNeyLM:
    """Interpolated Kneser–Ney n-gram model over a fixed vocabulary.

    ``KneserNeyLM(order, vocab).fit(sequences)`` counts the n-grams of ``sequences`` (lists of
    tokens, e.g. word strings or ids; every token must be in ``vocab``, so map rare words to an
    ``<unk>`` token first). ``prob(word, context)`` and ``logprob`` give ``P(word | context)``,
    where ``context`` is the list of preceding tokens (only the last ``order - 1`` count; a short
    one is padded with the boundary token, as at the start of a sequence); ``perplexity(sequences)``
    scores every token of every sequence. For each context the probabilities sum to 1 over ``vocab``.
    ``order`` is a positive int; ``vocab`` a collection of hashable tokens (strings or ints, without
    ``"<s>"``); every token given to a method must be in ``vocab`` (contexts may hold ``"<s>"`` as well).

    ``discounts`` fixes the discounts instead of estimating them: one number in (0, 1) per order,
    unigram first. After ``fit``, ``discounts`` holds those in use.

    ``modified=True`` gives modified Kneser–Ney (see the module's docstring): three discounts per
    order, and ``discounts`` (given or estimated) is one triple ``(D1, D2, D3+)`` per order, unigram
    first, with ``0 < Dk <= k``. Where the count-of-counts cannot give the estimates, they fall back:

    * an order where no n-gram has count 1, or none has count 2, or none has count 3 (``n1``, ``n2``
      or ``n3`` is zero, and a formula divides by it) uses the default model's single discount for
      all three, ``D1 = D2 = D3+ = D``: that order then follows the default model's formula;
    * every estimate ``Dk`` is clamped to ``[0.05, k]``. The ceiling keeps ``c - D(c) >= 0``, so
      each context's probabilities still sum to 1; the floor keeps ``gamma(h) > 0``, so every word
      keeps a probability above zero (the formulas give a negative ``D2`` when ``3 Y n3 > 2 n2`` and
      a negative ``D3+`` when ``4 Y n4 > 3 n3``).

    The default, ``modified=False``, is the single-discount model, unchanged.
    """

    def __init__(self, order: int, vocab: Iterable[Hashable], discounts: Sequence | None = None, *,
                 modified: bool = False):
        check_positive_int("order", order, hint="(1 = unigram)")
        self.order = order
        try:
            self.vocab = list(dict.fromkeys(vocab))
        except TypeError:  # not iterable, or a token that cannot be a dict key
            raise ValueError(f"vocab must be a collection of hashable tokens (e.g. strings or ints), got "
                             f"{type(vocab).__name__} {vocab!r:.60}") from None
        if not self.vocab:
            raise ValueError("vocab must hold at least one token")
        if BOUNDARY in self.vocab:
            raise ValueError(f"{BOUNDARY!r} is the boundary token; it cannot be in the vocabulary")
        self._in_vocab = set(self.vocab)
        if not isinstance(modified, bool):
            raise ValueError(f"modified must be True or False, got {type(modified).__name__}")
        self.modified = modified
        if modified:
            self._fixed_discounts = None if discounts is None else self._check_modified_discounts(discounts)
        else:
            if discounts is not None and not self._single_discounts_ok(discounts):
                raise ValueError(f"discounts must be {order} numbers in (0, 1), one per order (unigram first), "
                                 f"got {discounts!r}")
            self._fixed_discounts = None if discounts is None else tuple(float(d) for d in discounts)
        self.fitted = False

    def _single_discounts_ok(self, discounts) -> bool:
        """``discounts`` is ``order`` numbers in (0, 1) (a string, a bool or a non-sequence is not)."""
        try:
            return len(discounts) == self.order and all(
                not isinstance(d, (bool, str)) and 0 < d < 1 for d in discounts)
        except TypeError:  # no len(), or a value that cannot be compared with a number
            return False

    def _check_modified_discounts(self, discounts) -> tuple:
        message = (f"with modified=True, discounts must be {self.order} triples (D1, D2, D3+) with 0 < Dk <= k, "
                   f"one per order (unigram first), got {discounts!r}")
        try:
            if any(isinstance(d, (bool, str, bytes)) for triple in discounts for d in triple):
                raise TypeError  # float() would read True as 1 and "0.5" as 0.5
            triples = [tuple(float(d) for d in triple) for triple in discounts]
        except (TypeError, ValueError):
            raise ValueError(message) from None
        if len(triples) != self.order or not all(
                len(triple) == 3 and all(0 < d <= k for k, d in enumerate(triple, 1)) for triple in triples):
            raise ValueError(message)
        return tuple(triples)

    def fit(self, sequences: Iterable[Sequence[Hashable]]) -> KneserNeyLM:
        """Count the n-grams of ``sequences``; returns the model."""
        sequences = _check_sequences(sequences, "sequences")
        n = self.order
        # counts[k][(context, word)] for k = 1..n: raw counts at the top order, continuation counts below
        top = Counter()
        for s in sequences:
            unknown = next((t for t in s if not self._known(t)), _NONE)
            if unknown is not _NONE:
                raise ValueError(f"token {unknown!r} is not in the vocabulary: map it to an <unk> token first")
            padded = [BOUNDARY] * (n - 1) + s
            for i in range(n - 1, len(padded)):
                top[tuple(padded[i - n + 1:i]), padded[i]] += 1
        self.counts = {n: top}
        for k in range(n - 1, 0, -1):  # continuation counts: distinct words before (context, word)
            higher = self.counts[k + 1]
            self.counts[k] = Counter((context[1:], w) for context, w in higher)
        self.context_totals, self.followers = {}, {}
        for k, table in self.counts.items():
            totals, followers = Counter(), Counter()
            for (context, _w), c in table.items():
                totals[context] += c
                followers[context] += 1
            self.context_totals[k], self.followers[k] = totals, followers
        if self._fixed_discounts is not None:
            self.discounts = self._fixed_discounts
        elif self.modified:
            self.discounts = tuple(self._estimate_modified_discounts(self.counts[k]) for k in range(1, n + 1))
        else:
            self.discounts = tuple(self._estimate_discount(self.counts[k]) for k in range(1, n + 1))
        if self.modified:
            # the mass each context hands down, gamma(h) c(h) = D1 N1(h .) + D2 N2(h .) + D3+ N3+(h .)
            self.followers_by_count, self._lower_mass = {}, {}
            for k, table in self.counts.items():
                by_count = defaultdict(lambda: [0, 0, 0])  # context -> [N1, N2, N3+]
                for (context, _w), c in table.items():
                    by_count[context][min(c, 3) - 1] += 1
                d1, d2, d3 = self.discounts[k - 1]
                self.followers_by_count[k] = {h: tuple(nk) for h, nk in by_count.items()}
                self._lower_mass[k] = {h: d1 * n1 + d2 * n2 + d3 * n3 for h, (n1, n2, n3) in by_count.items()}
        self.fitted = True
        return self

    @staticmethod
    def _estimate_discount(table: Counter) -> float:
        n1 = sum(1 for c in table.values() if c == 1)
        n2 = sum(1 for c in table.values() if c == 2)
        if n1 == 0:
            return 0.5  # no singletons to estimate from (a tiny corpus): a middle value
        return min(max(n1 / (n1 + 2 * n2), 0.05), 0.95)

    @staticmethod
    def _estimate_modified_discounts(table: Counter) -> tuple[float, float, float]:
        n1, n2, n3, n4 = (sum(1 for c in table.values() if c == k) for k in (1, 2, 3, 4))
        if n1 == 0 or n2 == 0 or n3 == 0:  # a formula divides by zero: the single discount for all three
            d = KneserNeyLM._estimate_discount(table)
            return d, d, d
        y = n1 / (n1 + 2 * n2)
        raw = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
        return tuple(min(max(d, 0.05), k) for k, d in enumerate(raw, 1))

    def _known(self, token) -> bool:
        """Is ``token`` in the vocabulary? (False for an unhashable one, such as a list.)"""
        try:
            return token in self._in_vocab
        except TypeError:
            return False

    def _check_word(self, word) -> None:
        if not self.fitted:
            raise RuntimeError("call fit(sequences) before asking for probabilities")
        if not self._known(word):
            raise ValueError(f"word {word!r} is not in the vocabulary")

    def _prob(self, word, context: tuple, k: int) -> float:
        if k == 0:
            return 1.0 / len(self.vocab)
        context = context[len(context) - (k - 1):] if k > 1 else ()
        return self._interpolate(word, context, k, self._prob(word, context, k - 1))

    def _interpolate(self, word, context: tuple, k: int, lower: float) -> float:
        """``P_k(word | context)`` (``context``: exactly ``k - 1`` tokens) from ``lower``, the order-``k - 1``
        probability of ``word`` after ``context[1:]``."""
        total = self.context_totals[k].get(context, 0)
        if total == 0:
            return lower  # an unseen context hands all its mass down
        if self.modified:
            count = self.counts[k].get((context, word), 0)
            d = self.discounts[k - 1][min(count, 3) - 1] if count else 0.0
            return (count - d) / total + self._lower_mass[k][context] / total * lower
        d = self.discounts[k - 1]
        count = self.counts[k].get((context, word), 0)
        return max(count - d, 0.0) / total + d * self.followers[k][context] / total * lower

    def _context(self, context) -> tuple:
        context = tuple(context)[-(self.order - 1):] if self.order > 1 else ()
        return (BOUNDARY,) * (self.order - 1 - len(context)) + context

    def prob(self, word, context: Sequence = ()) -> float:
        """``P(word | context)``, ``context`` the preceding tokens (the last ``order - 1`` are used), each in the
        vocabulary or ``"<s>"``: a token the model never counted (a tensor element, say) would silently make
        the context unseen."""
        self._check_word(word)
        context = self._check_tokens(context, "context", boundary=True)
        return self._prob(word, self._context(context), self.order)

    def logprob(self, word, context: Sequence = ()) -> float:
        """Natural logarithm of ``prob(word, context)``."""
        return math.log(self.prob(word, context))

    def next_word_probs(self, context: Sequence = ()) -> dict:
        """``{word: P(word | context)}`` over the whole vocabulary (sums to 1); ``context`` as in ``prob``."""
        context = self._check_tokens(context, "context", boundary=True)
        return dict(zip(self.vocab, self._distribution(self._context(context))))

    def _distribution(self, context: tuple) -> list[float]:
        """``P(w | context)`` for every ``w`` of ``vocab``, in its order (``context``: padded, ``order - 1``
        tokens); the same numbers as ``_prob``, computed one order at a time for the whole vocabulary."""
        probs = [1.0 / len(self.vocab)] * len(self.vocab)
        for k in range(1, self.order + 1):
            h = context[len(context) - (k - 1):] if k > 1 else ()
            total = self.context_totals[k].get(h, 0)
            if not total:
                continue  # an unseen context hands all its mass down
            count = self.counts[k].get
            # the formula of _interpolate, in the same order of operations, with the context's numbers taken out
            if self.modified:
                discount = (0.0, *self.discounts[k - 1])  # D(0) = 0, D1, D2, D3+
                coef = self._lower_mass[k][h] / total
                probs = [(c - discount[min(c, 3)]) / total + coef * p
                         for c, p in zip((count((h, w), 0) for w in self.vocab), probs)]
            else:
                d = self.discounts[k - 1]
                coef = d * self.followers[k][h] / total
                probs = [max(count((h, w), 0) - d, 0.0) / total + coef * p for w, p in zip(self.vocab, probs)]
        return probs

    def _check_tokens(self, tokens, name: str, boundary: bool = False) -> list:
        """``tokens`` as a list, after checking that the model is fitted and every token is in the vocabulary
        (or, with ``boundary``, the boundary token)."""
        if not self.fitted:
            raise RuntimeError("call fit(sequences) before asking for probabilities")
        if isinstance(tokens, bytes) or not isinstance(tokens, Iterable):
            raise ValueError(f"{name} must be a sequence of tokens, got {type(tokens).__name__}")
        tokens = list(tokens)
        unknown = next((t for t in tokens if not (self._known(t) or boundary and t == BOUNDARY)), _NONE)
        if unknown is not _NONE:
            raise ValueError(f"{name} holds the token {unknown!r}, which is not in the vocabulary")
        return tokens

    def gap_probs(self, left: Sequence, right: Sequence) -> dict:
        """``{w: P(w | left, right)}`` over the whole vocabulary (sums to 1): the hidden token ``w`` of the
        sequence ``left + [w] + right``, whose start is ``left``'s (``left = []``: ``w`` comes first).

        ``P(w | left, right)`` is proportional to ``P(w | left) * prod_j P(right[j] | left, w, right[:j])``
        for ``j < min(len(right), order - 1)``: the later tokens of ``right`` do not see ``w``, so this is
        the model's exact posterior of ``w`` given the rest of the sequence (an n-gram model that sees
        both sides, the baseline of a masked language model). Computed in log space.
        """
        left, right = self._check_tokens(left, "left"), self._check_tokens(right, "right")
        n = self.order
        before = self._context(left)
        scores = [math.log(p) for p in self._distribution(before)]
        for j in range(min(len(right), n - 1)):
            target, after = right[j], tuple(right[:j])
            base = self._prob(target, after, j + 1)  # the orders up to j + 1 see only right[:j], not w
            # the orders k from j + 2 on see w: their context is the last k - 2 - j tokens before w, w, right[:j]
            levels = [(k, before[len(before) - (k - 2 - j):] if k > j + 2 else (), self.context_totals[k])
                      for k in range(j + 2, n + 1)]
            for i, w in enumerate(self.vocab):
                p = base
                for k, prefix, totals in levels:
                    h = prefix + (w,) + after
                    if not totals.get(h, 0):
                        break  # unseen, so is every longer context (it would have h as its suffix): p stays
                    p = self._interpolate(target, h, k, p)
                scores[i] += math.log(p)
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        total = math.fsum(weights)
        return {w: x / total for w, x in zip(self.vocab, weights)}

    def sample(self, context: Sequence, num_tokens: int, generator: random.Random | None = None,
               temperature: float = 1.0) -> list:
        """``num_tokens`` new tokens that continue ``context``, each drawn from ``next_word_probs`` of the
        tokens so far raised to the power ``1 / temperature`` and renormalised (a small temperature tends to
        the most likely word, a large one to the uniform distribution). ``generator``: a ``random.Random``
        (default ``random.Random(0)``, so the result is reproducible). Returns the new tokens only."""
        tokens = self._check_tokens(context, "context")
        check_positive_int("num_tokens", num_tokens)
        if not is_finite_number(temperature) or temperature <= 0:
            raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
        if generator is None:
            generator = random.Random(0)
        elif not isinstance(generator, random.Random):
            raise ValueError(f"generator must be a random.Random or None, got {type(generator).__name__}")
        new = []
        for _ in range(num_tokens):
            logs = [math.log(p) for p in self._distribution(self._context(tokens + new))]
            top = max(logs)
            weights = [math.exp((lp - top) / temperature) for lp in logs]  # the most likely word weighs 1
            new.append(generator.choices(self.vocab, weights)[0])
        return new

    def sequence_logprobs(self, sequence: Sequence) -> list[float]:
        """The log-probability of each token of ``sequence`` given the tokens before it in the sequence."""
        sequence = self._check_tokens(sequence, "sequence")
        padded = [BOUNDARY] * (self.order - 1) + sequence
        n = self.order
        return [math.log(self._prob(padded[i], tuple(padded[i - n + 1:i]), n)) for i in range(n - 1, len(padded))]

    def perplexity(self, sequences: Iterable[Sequence]) -> float:
        """``exp`` of the mean negative log-probability over every token of ``sequences``."""
        sequences = _check_sequences(sequences, "sequences")
        logs = [lp for s in sequences for lp in self.sequence_logprobs(s)]
        return math.exp(-sum(logs) / len(logs))


class NeighbourGuesser:
    """The count-based baseline of a masked language model: guess a hidden word from its two neighbours.

    ``NeighbourGuesser(sequences)`` counts, for every word of ``sequences``, its left and right
    neighbours (the boundary token ``<s>`` at either end). ``guess(left, right)`` returns the word seen
    most often between ``left`` and ``right``; for a pair never seen, the word seen most often after
    ``left``, then before ``right``, then the most frequent word. Ties go to the word counted first.
    ``None`` for one side ignores it: ``guess(left, None)`` is the word seen most often after ``left``.
    Tokens are hashable (strings or ints).
    """

    def __init__(self, sequences: Iterable[Sequence[Hashable]]):
        tables = defaultdict(Counter)
        for s in _check_sequences(sequences, "sequences"):
            padded = [BOUNDARY, *s, BOUNDARY]
            for i in range(1, len(padded) - 1):
                left, w, right = padded[i - 1], padded[i], padded[i + 1]
                try:
                    for key in ((left, right), (left, None), (None, right), (None, None)):
                        tables[key][w] += 1
                except TypeError:  # a list or another unhashable token
                    raise ValueError(f"sequences must hold hashable tokens (e.g. strings or ints), got "
                                     f"{type(w).__name__} {w!r:.40}") from None
        self._best = {key: counter.most_common(1)[0][0] for key, counter in tables.items()}

    def guess(self, left, right):
        """The most likely hidden word between ``left`` and ``right`` (use ``"<s>"`` at a sequence's ends)."""
        for name, token in (("left", left), ("right", right)):
            try:
                hash(token)
            except TypeError:
                raise ValueError(f"{name} must be a token (hashable), got {type(token).__name__} "
                                 f"{token!r:.40}") from None
        for key in ((left, right), (left, None), (None, right), (None, None)):
            if key in self._best:
                return self._best[key]
        raise AssertionError("unreachable: (None, None) is always counted")
