"""Samplers: iterables of dataset indices (SequentialSampler, RandomSampler, SubsetRandomSampler)
and BatchSampler, which groups another sampler's indices into lists."""

import kiln

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler"]


class Sampler:
    """Base class: subclasses define __iter__ (indices) and usually __len__."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)

    def _index_tensor(self):
        return kiln.arange(len(self.data_source))


def _fresh_generator(generator):
    if generator is not None:
        return generator
    seed = int(kiln.empty((), dtype=kiln.int64).random_().item())
    return kiln.Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """A random permutation of the indices (kiln.randperm with `generator`), or with
    replacement=True `num_samples` indices drawn uniformly."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def _index_tensor(self):
        """All indices of one pass as one int64 tensor (what __iter__ yields, in order)."""
        n = len(self.data_source)
        generator = _fresh_generator(self.generator)
        if self.replacement:
            return kiln.randint(0, n, (self.num_samples,), dtype=kiln.int64, generator=generator)
        parts = [kiln.randperm(n, generator=generator) for _ in range(self.num_samples // n)]
        if self.num_samples % n:
            parts.append(kiln.randperm(n, generator=generator)[: self.num_samples % n])
        return parts[0] if len(parts) == 1 else kiln.cat(parts)

    def __iter__(self):
        return iter(self._index_tensor().tolist())

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in kiln.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups `sampler`'s indices into lists of `batch_size` (the last one shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
