import { prefixCacheConformance } from './prefix_cache.case.js';
import { ChunkCache } from './chunk_cache.js';

prefixCacheConformance('ChunkCache', (a) => new ChunkCache(a));
