/* avl.h: an intrusive AVL tree with parent links; callers descend with their own comparison and
 *   call avl_link to insert, so keys and lookups stay inlined in the caller.
 * Locking: none inside; each tree is protected by its owner's lock (the device lock).
 * Hot path: yes; no allocation, O(log n) insert/remove, O(1) amortized next/prev. */
#ifndef CUPROF_AVL_H
#define CUPROF_AVL_H

#include <stddef.h>

struct avl_node {
    struct avl_node *left;
    struct avl_node *right;
    struct avl_node *parent;
    int height; /* 1 for a leaf */
};

struct avl_tree {
    struct avl_node *root;
    size_t count;
};

/* Links `node` as the left (is_left) or right child of `parent` (NULL: the tree is empty) and
 * rebalances. The caller found the spot by descending from tree->root. */
void avl_link(struct avl_tree *tree, struct avl_node *node, struct avl_node *parent, int is_left);
/* Unlinks `node` (which must be in the tree) and rebalances. */
void avl_remove(struct avl_tree *tree, struct avl_node *node);
struct avl_node *avl_first(const struct avl_tree *tree);
struct avl_node *avl_last(const struct avl_tree *tree);
/* Height of a subtree (0 for NULL), for invariant checks. */
int avl_height(const struct avl_node *node);
/* Checks parent links, heights and balance of the whole tree; returns 0 when valid. */
int avl_check(const struct avl_tree *tree);

/* In-order neighbours (inline: the pools' rank checks call them on every split and merge). */
static inline struct avl_node *
avl_next(const struct avl_node *node)
{
    if (node->right) {
        node = node->right;
        while (node->left)
            node = node->left;
        return (struct avl_node *)node;
    }
    while (node->parent && node->parent->right == node)
        node = node->parent;
    return node->parent;
}

static inline struct avl_node *
avl_prev(const struct avl_node *node)
{
    if (node->left) {
        node = node->left;
        while (node->right)
            node = node->right;
        return (struct avl_node *)node;
    }
    while (node->parent && node->parent->left == node)
        node = node->parent;
    return node->parent;
}

/* Puts `node` where `old` (which must be in the tree) is and unlinks `old`, in O(1). The caller
 * keeps the order: node's key sorts where old's did. */
static inline void
avl_replace(struct avl_tree *tree, struct avl_node *old, struct avl_node *node)
{
    *node = *old;
    if (node->left)
        node->left->parent = node;
    if (node->right)
        node->right->parent = node;
    if (node->parent == NULL)
        tree->root = node;
    else if (node->parent->left == old)
        node->parent->left = node;
    else
        node->parent->right = node;
    old->left = old->right = old->parent = NULL;
}

#endif
