"""kiln.utils.data.DataLoader: batches from a dataset through a sampler, a batch sampler and a collate
function, with torch.utils.data.DataLoader's arguments and checks. Loading runs in the calling process
(num_workers is accepted and ignored: kiln has no worker processes).

Fast path (Note [TensorDataset batches]): when the dataset is a TensorDataset (or a Subset of one),
the collate function is default_collate, and the batch sampler is the default one over a Sequential-
or RandomSampler, a pass draws the whole index order as one int64 tensor (the same draw the sampler's
__iter__ makes, so both paths give the same batches) and each batch is `t.index_select(0, idx)` per
tensor, instead of indexing samples one by one and stacking them.
"""

import kiln
from kiln.utils.data._collate import default_collate, default_convert
from kiln.utils.data.dataset import IterableDataset, Subset, TensorDataset
from kiln.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]


class _InfiniteConstantSampler(Sampler):
    def __iter__(self):
        while True:
            yield None


def _tensor_source(dataset):
    """(tensors, index map or None) when batches can be gathered straight from the tensors."""
    if type(dataset) is TensorDataset:
        return dataset.tensors, None
    if type(dataset) is Subset and type(dataset.dataset) is TensorDataset:
        indices = dataset.indices
        if not isinstance(indices, kiln.Tensor):
            indices = kiln.tensor(list(indices), dtype=kiln.int64) if len(indices) else kiln.zeros(0, dtype=kiln.int64)
        return dataset.dataset.tensors, indices
    return None


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.persistent_workers = persistent_workers
        self._is_iterable = isinstance(dataset, IterableDataset)

        if self._is_iterable:
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 f"but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, "
                                 f"but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                 "drop_last")

        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._is_iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else -(-length // self.batch_size)
            return length
        return len(self._index_sampler)

    def __iter__(self):
        if self._is_iterable:
            return self._iter_iterable()
        source = _tensor_source(self.dataset)
        bs = self.batch_sampler
        if (source is not None and self.collate_fn is default_collate and type(bs) is BatchSampler
                and type(bs.sampler) in (SequentialSampler, RandomSampler) and bs.sampler.data_source is self.dataset):
            return self._iter_tensors(source)
        return self._iter_map()

    def _iter_tensors(self, source):
        tensors, index_map = source
        order = self.batch_sampler.sampler._index_tensor()
        n, bs = order.numel(), self.batch_sampler.batch_size
        stop = n - n % bs if self.batch_sampler.drop_last else n
        for start in range(0, stop, bs):
            idx = order[start:start + bs]
            if index_map is not None:
                idx = index_map.index_select(0, idx)
            yield [t.index_select(0, idx) for t in tensors]

    def _iter_map(self):
        dataset, collate = self.dataset, self.collate_fn
        if not self._auto_collation:
            for index in self.sampler:
                yield collate(dataset[index])
            return
        getitems = getattr(dataset, "__getitems__", None)
        for indices in self.batch_sampler:
            data = getitems(indices) if getitems is not None else [dataset[i] for i in indices]
            yield collate(data)

    def _iter_iterable(self):
        it = iter(self.dataset)
        if not self._auto_collation:
            for sample in it:
                yield self.collate_fn(sample)
            return
        while True:
            batch = []
            for sample in it:
                batch.append(sample)
                if len(batch) == self.batch_size:
                    break
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield self.collate_fn(batch)
