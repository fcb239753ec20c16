/* avl.c: intrusive AVL tree with parent links (insert, remove, in-order walk, self-check). */
#include "allocator/avl.h"

int
avl_height(const struct avl_node *node)
{
    return node ? node->height : 0;
}

static void
update_height(struct avl_node *n)
{
    int l = avl_height(n->left), r = avl_height(n->right);
    n->height = 1 + (l > r ? l : r);
}

static void
replace_child(struct avl_tree *tree, struct avl_node *parent, struct avl_node *old,
              struct avl_node *new_node)
{
    if (parent == NULL)
        tree->root = new_node;
    else if (parent->left == old)
        parent->left = new_node;
    else
        parent->right = new_node;
}

static struct avl_node *
rotate_left(struct avl_tree *tree, struct avl_node *x)
{
    struct avl_node *y = x->right;
    x->right = y->left;
    if (y->left)
        y->left->parent = x;
    y->parent = x->parent;
    replace_child(tree, x->parent, x, y);
    y->left = x;
    x->parent = y;
    update_height(x);
    update_height(y);
    return y;
}

static struct avl_node *
rotate_right(struct avl_tree *tree, struct avl_node *x)
{
    struct avl_node *y = x->left;
    x->left = y->right;
    if (y->right)
        y->right->parent = x;
    y->parent = x->parent;
    replace_child(tree, x->parent, x, y);
    y->right = x;
    x->parent = y;
    update_height(x);
    update_height(y);
    return y;
}

/* Walks up from n restoring heights and balance; stops once a subtree's height is unchanged. */
static void
rebalance(struct avl_tree *tree, struct avl_node *n)
{
    while (n != NULL) {
        int old = n->height;
        update_height(n);
        int bal = avl_height(n->left) - avl_height(n->right);
        if (bal > 1) {
            if (avl_height(n->left->left) < avl_height(n->left->right))
                rotate_left(tree, n->left);
            n = rotate_right(tree, n);
        } else if (bal < -1) {
            if (avl_height(n->right->right) < avl_height(n->right->left))
                rotate_right(tree, n->right);
            n = rotate_left(tree, n);
        } else if (n->height == old) {
            return;
        }
        n = n->parent;
    }
}

void
avl_link(struct avl_tree *tree, struct avl_node *node, struct avl_node *parent, int is_left)
{
    node->left = NULL;
    node->right = NULL;
    node->parent = parent;
    node->height = 1;
    if (parent == NULL)
        tree->root = node;
    else if (is_left)
        parent->left = node;
    else
        parent->right = node;
    tree->count++;
    rebalance(tree, parent);
}

static struct avl_node *
leftmost(struct avl_node *n)
{
    while (n->left)
        n = n->left;
    return n;
}

static struct avl_node *
rightmost(struct avl_node *n)
{
    while (n->right)
        n = n->right;
    return n;
}

void
avl_remove(struct avl_tree *tree, struct avl_node *node)
{
    struct avl_node *start;
    if (node->left != NULL && node->right != NULL) {
        struct avl_node *succ = leftmost(node->right);
        if (succ->parent == node) {
            start = succ;
        } else {
            struct avl_node *sp = succ->parent;
            sp->left = succ->right;
            if (succ->right)
                succ->right->parent = sp;
            succ->right = node->right;
            node->right->parent = succ;
            start = sp;
        }
        succ->left = node->left;
        node->left->parent = succ;
        succ->parent = node->parent;
        replace_child(tree, node->parent, node, succ);
        succ->height = node->height;
    } else {
        struct avl_node *child = node->left ? node->left : node->right;
        if (child)
            child->parent = node->parent;
        replace_child(tree, node->parent, node, child);
        start = node->parent;
    }
    tree->count--;
    node->left = node->right = node->parent = NULL;
    rebalance(tree, start);
}

struct avl_node *
avl_first(const struct avl_tree *tree)
{
    return tree->root ? leftmost(tree->root) : NULL;
}

struct avl_node *
avl_last(const struct avl_tree *tree)
{
    return tree->root ? rightmost(tree->root) : NULL;
}

static int
check_subtree(const struct avl_node *n, const struct avl_node *parent, size_t *count)
{
    if (n == NULL)
        return 0;
    if (n->parent != parent)
        return -1;
    (*count)++;
    int l = avl_height(n->left), r = avl_height(n->right);
    if (n->height != 1 + (l > r ? l : r) || l - r > 1 || r - l > 1)
        return -1;
    if (check_subtree(n->left, n, count) != 0 || check_subtree(n->right, n, count) != 0)
        return -1;
    return 0;
}

int
avl_check(const struct avl_tree *tree)
{
    size_t count = 0;
    if (check_subtree(tree->root, NULL, &count) != 0)
        return -1;
    return count == tree->count ? 0 : -1;
}
