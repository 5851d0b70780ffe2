// Approximate radix tree over request text characters, each node tagged with the workers ("tenants") that were
// sent a request through it — the cache_aware policy's model of each worker's prefix cache
// (sgl-router src/tree.rs / policies/cache_aware.rs: character-level, per-tenant LRU eviction, smallest tenant).

interface Node {
  /** Characters of this edge (code points, so a surrogate pair never splits). */
  text: string[];
  children: Map<string, Node>;
  parent: Node | null;
  /** tenant → last access time, ms */
  tenants: Map<string, number>;
}

/** Result of {@link ApproxRadixTree.prefixMatch}. */
export interface TreeMatch {
  /** Characters of the query matched along one path. */
  readonly matchedChars: number;
  /** A tenant owning the deepest matched node (the most recently used), or null when nothing matched. */
  readonly tenant: string | null;
}

/**
 * Character-level prefix tree with tenant sets per node. Sizes are counted in characters per tenant (the
 * footprint the router's eviction bounds with --max-tree-size).
 */
export class ApproxRadixTree {
  private readonly root: Node = { text: [], children: new Map(), parent: null, tenants: new Map() };
  /** tenant → characters of the tree it owns */
  private readonly sizes = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Registers a tenant with size 0 (so "smallest tenant" sees workers that never got a request). */
  addTenant(tenant: string): void {
    if (!this.sizes.has(tenant)) this.sizes.set(tenant, 0);
  }

  /** Characters owned by each tenant. */
  tenantSizes(): Map<string, number> {
    return new Map(this.sizes);
  }

  /** Total characters stored (each edge once). */
  get totalSize(): number {
    let n = 0;
    const walk = (x: Node): void => {
      n += x.text.length;
      for (const c of x.children.values()) walk(c);
    };
    walk(this.root);
    return n;
  }

  /** Inserts `text` under `tenant` (splitting edges where it diverges) and refreshes access times along the path. */
  insert(text: string, tenant: string): void {
    const chars = [...text];
    const t = this.now();
    this.addTenant(tenant);
    let node = this.root;
    this.touch(node, tenant, t, 0);
    let i = 0;
    while (i < chars.length) {
      const child = node.children.get(chars[i]);
      if (!child) {
        const leaf: Node = { text: chars.slice(i), children: new Map(), parent: node, tenants: new Map() };
        node.children.set(chars[i], leaf);
        this.touch(leaf, tenant, t, leaf.text.length);
        return;
      }
      let k = 0;
      while (k < child.text.length && i + k < chars.length && child.text[k] === chars[i + k]) k++;
      if (k < child.text.length) this.split(child, k);
      const next = node.children.get(chars[i])!;
      this.touch(next, tenant, t, next.text.length);
      node = next;
      i += k;
    }
  }

  /**
   * Longest prefix of `text` in the tree, and the most recently used tenant at the deepest matched node.
   * @param tenants restrict the answer to these tenants (e.g. the healthy workers); default any
   */
  prefixMatch(text: string, tenants?: ReadonlySet<string>): TreeMatch {
    const chars = [...text];
    let node = this.root;
    let i = 0;
    let best: { n: number; tenant: string } | null = null;
    for (;;) {
      const child = i < chars.length ? node.children.get(chars[i]) : undefined;
      if (!child) break;
      let k = 0;
      while (k < child.text.length && i + k < chars.length && child.text[k] === chars[i + k]) k++;
      const owner = this.freshestTenant(child, tenants);
      if (!owner) break;
      i += k;
      best = { n: i, tenant: owner };
      if (k < child.text.length) break;
      node = child;
    }
    return { matchedChars: best?.n ?? 0, tenant: best?.tenant ?? null };
  }

  /** The tenant with the fewest characters among `tenants` (ties: the first given). */
  smallestTenant(tenants: readonly string[]): string | null {
    let best: string | null = null;
    let size = Infinity;
    for (const t of tenants) {
      const s = this.sizes.get(t) ?? 0;
      if (s < size) { best = t; size = s; }
    }
    return best;
  }

  /**
   * Evicts each tenant's least recently used leaves until it owns at most `maxSize` characters
   * (sgl-router evict_tenant_by_size). Nodes no tenant owns any more are removed.
   */
  evictBySize(maxSize: number): void {
    for (const [tenant, size] of this.sizes) {
      if (size <= maxSize) continue;
      const leaves: Node[] = [];
      const walk = (x: Node): void => {
        const owned = [...x.children.values()].filter((c) => c.tenants.has(tenant));
        if (x !== this.root && owned.length === 0 && x.tenants.has(tenant)) leaves.push(x);
        for (const c of owned) walk(c);
      };
      walk(this.root);
      let cur = size;
      while (cur > maxSize && leaves.length > 0) {
        leaves.sort((a, b) => b.tenants.get(tenant)! - a.tenants.get(tenant)!);
        const leaf = leaves.pop()!;
        cur -= leaf.text.length;
        leaf.tenants.delete(tenant);
        const parent = leaf.parent!;
        if (leaf.tenants.size === 0 && leaf.children.size === 0) parent.children.delete(leaf.text[0]);
        if (parent !== this.root && parent.tenants.has(tenant) && ![...parent.children.values()].some((c) => c.tenants.has(tenant))) leaves.push(parent);
      }
      this.sizes.set(tenant, cur);
    }
  }

  /** Forgets a tenant entirely (a worker removed from the router). */
  removeTenant(tenant: string): void {
    const walk = (x: Node): void => {
      x.tenants.delete(tenant);
      for (const [k, c] of [...x.children]) {
        walk(c);
        if (c.tenants.size === 0 && c.children.size === 0) x.children.delete(k);
      }
    };
    walk(this.root);
    this.sizes.delete(tenant);
  }

  private touch(node: Node, tenant: string, t: number, chars: number): void {
    if (!node.tenants.has(tenant) && node !== this.root) this.sizes.set(tenant, (this.sizes.get(tenant) ?? 0) + chars);
    node.tenants.set(tenant, t);
  }

  private freshestTenant(node: Node, tenants?: ReadonlySet<string>): string | null {
    let best: string | null = null;
    let bt = -Infinity;
    for (const [t, at] of node.tenants) {
      if (tenants && !tenants.has(t)) continue;
      if (at > bt) { best = t; bt = at; }
    }
    return best;
  }

  /** Splits `child` after `k` characters: a new inner node takes the first k and child's tenants. */
  private split(child: Node, k: number): void {
    const parent = child.parent!;
    const mid: Node = { text: child.text.slice(0, k), children: new Map(), parent, tenants: new Map(child.tenants) };
    child.text = child.text.slice(k);
    child.parent = mid;
    mid.children.set(child.text[0], child);
    parent.children.set(mid.text[0], mid);
  }
}
