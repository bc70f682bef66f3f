"""kiln.utils.data: datasets, samplers and DataLoader, as torch.utils.data."""

from kiln.utils.data.dataset import (ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,  # noqa: F401
                                     random_split)
from kiln.utils.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                                     SubsetRandomSampler)
from kiln.utils.data._collate import default_collate, default_convert  # noqa: F401
from kiln.utils.data.dataloader import DataLoader  # noqa: F401
